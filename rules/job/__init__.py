"""Job rules: findings over all ranks of a distributed job (entry-point group ``advisor.job_rules``)."""

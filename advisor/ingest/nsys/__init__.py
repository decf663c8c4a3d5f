"""Nsight Systems SQLite exports: open the file safely (`export_file`), speak every schema
version (`schema`), choose the window (`window`) and load it into an `OpGraph` (`loader`)."""

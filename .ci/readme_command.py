"""Print the README's first command (the first ```bash block under "## Quick start").

`.ci/install_check.sh` runs exactly what this prints, so the README and CI cannot drift apart.
"""

from pathlib import Path

readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
quick = readme.split("## Quick start", 1)[1]
print(quick.split("```bash\n", 1)[1].split("```", 1)[0].strip())

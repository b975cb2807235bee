"""`scripts/clients/python prepare` on any machine: its virtualenv comes
from scripts/make-python-venv, which leaves a virtualenv with pip or fails
saying why, Debian's own python3 (no ensurepip until Debian's python3-venv
is installed) included. Real interpreters and real virtualenvs; only
apt-get and sudo are stand-ins, so the test installs nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from servers import REPO

MAKE_VENV = REPO / "scripts" / "make-python-venv"
# The interpreter this test's own virtualenv was made from.
PYTHON = getattr(sys, "_base_executable", sys.executable)


def has_pip(venv: Path) -> bool:
    python = venv / "bin" / "python"
    return python.exists() and subprocess.run([python, "-m", "pip", "--version"], capture_output=True).returncode == 0


def make_venv(venv: Path, python: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": python, "PATH": path or os.environ["PATH"]}
    return subprocess.run([MAKE_VENV, venv], env=env, capture_output=True, text=True, timeout=300)


def test_a_virtualenv_left_without_pip_is_made_again_with_pip(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    # What a python3 without ensurepip leaves behind: an interpreter, no pip.
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", venv], check=True)
    assert not has_pip(venv)
    made = make_venv(venv, PYTHON)
    assert made.returncode == 0, made.stderr
    assert has_pip(venv)


def test_a_python3_without_ensurepip_gets_debians_python3_venv_then_its_virtualenv(tmp_path: Path) -> None:
    bin_dir, venv, apt_log = tmp_path / "bin", tmp_path / "venv", tmp_path / "apt.log"
    bin_dir.mkdir()
    installed = tmp_path / "python3-venv-installed"
    stand_ins = {
        # Debian's python3 before python3-venv: no ensurepip, so no venv.
        "python3": f"""[ -e {installed} ] || case "$*" in *ensurepip*|*venv*)
  echo "ensurepip is not available" >&2; exit 1;; esac
exec {PYTHON} "$@"
""",
        "apt-get": f"""echo "$@" >> {apt_log}
case "$*" in *python3-venv*) touch {installed};; esac
""",
        "sudo": """[ "$1" = -n ] && shift
exec "$@"
""",
    }
    for name, body in stand_ins.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    made = make_venv(venv, "python3", f"{bin_dir}:{os.environ['PATH']}")
    assert made.returncode == 0, made.stderr
    assert "installing Debian's python3-venv" in made.stderr
    assert apt_log.read_text().splitlines() == ["update -qq", "install -y -qq --no-install-recommends python3-venv"]
    assert has_pip(venv)

"""Helpers for the tests that put a ledger where it cannot be written or where the disk fills: a tiny campaign spec,
the ``closedloop`` command line in a subprocess, and a private mount namespace (``unshare -m``) for a read-only bind
mount or a small tmpfs, so that nothing is mounted on the machine running the tests and root cannot write either."""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

MOLECULES = ["C", "CC", "CCC", "CCCC", "CCCCC", "CCCCCC", "CO", "CCO", "CCCO", "CCCCO", "CN", "CCN"]
ROOT = Path(__file__).resolve().parents[3]


def write_tiny_spec(folder: Path, *, lab_experiments: int = 8) -> Path:
    """A campaign on twelve small molecules with the random and bo arms: a whole run takes a few seconds."""
    rows = "".join(f"{smiles},{k}\n" for k, smiles in enumerate(MOLECULES))
    (folder / "pool.csv").write_text("smiles,y\n" + rows)
    path = folder / "campaign.toml"
    path.write_text('[campaign]\nname = "tiny"\nkind = "molecule"\n[objective]\ndirection = "maximize"\n'
                    '[space]\npool = "pool.csv"\ncolumn = "smiles"\n[lab]\noracle_column = "y"\n'
                    f'[budget]\nlab_experiments = {lab_experiments}\n'
                    '[planner]\nmain = "random"\ncontrol = "bo"\ncontrol_share = 0.2\nbatch_size = 2\n')
    return path


def closedloop_argv(*args: object) -> list[str]:
    """The ``closedloop`` console script's command line, run by this interpreter."""
    return [sys.executable, "-m", "orchestrator.interfaces.cli_main", *map(str, args)]


def closedloop_shell(*args: object) -> str:
    return " ".join(shlex.quote(a) for a in closedloop_argv(*args))


@functools.cache
def mount_namespace_problem() -> str | None:
    """Why a private mount namespace with a read-only bind mount cannot be had here (None when it can)."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "unshare(1) or mount(8) is not installed"
    probe = Path(os.environ.get("TMPDIR", "/tmp")) / f"closedloop-mount-probe-{os.getpid()}"
    probe.mkdir(exist_ok=True)
    flags = "-m" if os.geteuid() == 0 else "-rm"
    script = f"mount --bind {probe} {probe} && mount -o remount,ro,bind {probe} && ! touch {probe}/x 2>/dev/null"
    try:
        done = subprocess.run(["unshare", flags, "sh", "-c", script], capture_output=True, text=True, timeout=30)
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    if done.returncode != 0:
        return f"no private mount namespace here (unshare {flags}: {done.stderr.strip() or done.returncode})"
    return None


def in_mount_namespace(script: str, *, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run a shell ``script`` in a private mount namespace (as root, or as a mapped root where user namespaces are
    allowed); its mounts vanish with it."""
    flags = "-m" if os.geteuid() == 0 else "-rm"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run(["unshare", flags, "sh", "-c", script], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=ROOT)


def read_only_bind(source: Path, target: Path) -> str:
    """The shell lines that show ``source`` at ``target`` through a read-only bind mount."""
    return (f"mount --bind {shlex.quote(str(source))} {shlex.quote(str(target))} && "
            f"mount -o remount,ro,bind {shlex.quote(str(target))}")

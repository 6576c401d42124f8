"""How pilots started elsewhere learn the manager's CA: a VM's boot script carries the CA
certificate's text and hands the pilot a file of it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from isthmus.backends.cloud_site import user_data
from isthmus.tls import make_self_signed


def test_a_vms_boot_script_writes_the_ca_certificate_and_passes_its_file(tmp_path: Path) -> None:
    cert, _ = make_self_signed(tmp_path / "tls", ["head"])
    pem = cert.read_text()
    script = user_data("echo", "https://head:8750", "1/v3", 2, 30.0, "secret-token", pem)
    # run it with `echo` as the agent command: the pilot's arguments come out
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=10, check=True).stdout
    args = out.split()
    assert args[:4] == ["--url", "https://head:8750", "--node", "1/v3"]
    ca_file = Path(args[args.index("--ca-file") + 1])
    try:
        assert ca_file.read_text().strip() == pem.strip()
        assert "secret-token" not in out and "--insecure-http" not in args
    finally:
        ca_file.unlink()
    plain = user_data("echo", "http://head:8750", "1/v3", 2, 30.0, "t", None, True)
    assert "ISTHMUS_CA" not in plain and "--ca-file" not in plain and "--insecure-http" in plain

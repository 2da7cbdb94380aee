"""What `kubectl krew upgrade` does, emulated (standard library and PyYAML only), for the one thing
the real krew cannot be made to do here: the tests install, run and uninstall the release with the
real krew (tests/test_release.py: every platform through KREW_OS/KREW_ARCH, the noexec mounts, every
credential path), but krew upgrades only plugins installed from its index, which it downloads from
the manifest's release URL, and skips one installed from a manifest. So the upgrade from the
onefile release to the one-folder one is installed by `krew_install` below, as krew's source does
it; and `selector_matches` is krew's platform selector, for the manifest rules.

krew's own rules, as its source has them: the archive is unpacked into a temporary directory
(under $TMPDIR) and only regular files and directories are accepted; each `files` operation moves
what its `from` names (a path, else a glob) into `to` of the install directory
$KREW_ROOT/store/<name>/<version>; `bin` is linked as $KREW_ROOT/bin/kubectl-<name> with an absolute
symbolic link; the manifest is kept as the receipt. An upgrade installs the new version beside the
old one, relinks `bin`, then removes the old version's directory and replaces the receipt.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

import yaml


def selector_matches(selector: dict, os_: str, arch: str) -> bool:
    labels = {"os": os_, "arch": arch}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        value, values = labels.get(expression["key"]), expression.get("values") or []
        operator = expression["operator"]
        if (operator == "In" and value not in values) or (operator == "NotIn" and value in values) \
                or (operator == "Exists" and value is None) or (operator == "DoesNotExist" and value is not None):
            return False
    return True


def _platform(manifest: dict, os_: str, arch: str) -> dict:
    chosen = [p for p in manifest["spec"]["platforms"] if selector_matches(p["selector"], os_, arch)]
    assert len(chosen) == 1, f"no single platform for {os_}/{arch}"
    return chosen[0]


def _unpack(archive: Path, staging: Path) -> None:
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            assert not member.name.startswith("/") and ".." not in Path(member.name).parts
            assert member.isfile() or member.isdir(), f"krew archives hold no links: {member.name}"
        tar.extractall(staging, filter="data")


def _move_files(staging: Path, install: Path, files: list[dict]) -> None:
    for op in files:
        direct = staging / op["from"]
        matched = [direct] if direct.exists() else sorted(staging.glob(op["from"]))
        assert matched, f"files: {op['from']} matches nothing in the archive"
        for source in matched:
            target = install / op["to"] / source.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(source), target)  # across file systems ($TMPDIR to KREW_ROOT): a copy


def krew_install(manifest_path: Path, archive: Path, krew_root: Path, os_: str, arch: str) -> Path:
    """Install (or upgrade to) the manifest's version from ``archive``; returns the bin link."""
    manifest = yaml.safe_load(manifest_path.read_text())
    name, version = manifest["metadata"]["name"], manifest["spec"]["version"]
    platform = _platform(manifest, os_, arch)
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == platform["sha256"], "checksum does not match"
    receipt = krew_root / "receipts" / f"{name}.yaml"
    previous = yaml.safe_load(receipt.read_text())["spec"]["version"] if receipt.exists() else None
    assert previous != version, f"{name} {version} is installed already"
    install = krew_root / "store" / name / version
    with tempfile.TemporaryDirectory(prefix="krew-") as staging:  # $TMPDIR, as krew's
        _unpack(archive, Path(staging))
        install.mkdir(parents=True)
        _move_files(Path(staging), install, platform.get("files") or [{"from": "*", "to": "."}])
    binary = install / platform["bin"]
    assert binary.is_file() and os.access(binary, os.X_OK), "bin is not in the archive"
    (krew_root / "bin").mkdir(exist_ok=True)
    link = krew_root / "bin" / f"kubectl-{name}"
    if link.is_symlink():
        link.unlink()
    link.symlink_to(binary)
    if previous is not None:
        shutil.rmtree(krew_root / "store" / name / previous)
    receipt.parent.mkdir(exist_ok=True)
    shutil.copy(manifest_path, receipt)
    return link

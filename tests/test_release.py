"""The krew release: plugin.yaml against krew's validate-krew-manifest rules, the release step that
fills it, and the PyInstaller build (built once per session, only where PyInstaller is installed:
`pip install -e '.[build]'`; .ci/run does): the one-folder krew archive installed by the real krew
(`kubectl krew install --manifest=plugin.yaml --archive=...`, krew v0.4.3 built by
scripts/control-plane, in a KREW_ROOT of its own), run with every credential path and on noexec
mounts, uninstalled again; and the onefile asset. tests/_krew.py emulates krew where the real one
cannot run (its docstring says where)."""

from __future__ import annotations

import base64
import copy
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from _controlplane import _script as _control_plane_script
from _krew import krew_install, selector_matches
from _support import EXAMPLES, ROOT, documents, script_module, seed
from conftest import kubectl_path

pytestmark = [
    pytest.mark.version_sensitive,  # the man page (test_tiers.py)
    pytest.mark.xdist_group("release"),  # one worker builds the binary once (noxfile.py)
    pytest.mark.timeout(1200),  # the first test that asks for the binary waits for its build
]

BUILD = ROOT / "scripts" / "build-binary"
MANIFEST = ROOT / "plugin.yaml"
#: The <os, arch> pairs krew runs on (krew's allPlatforms, plus the arm64 ones it gained since).
KREW_PLATFORMS = (("windows", "386"), ("windows", "amd64"), ("windows", "arm64"), ("linux", "386"),
                  ("linux", "amd64"), ("linux", "arm"), ("linux", "arm64"), ("linux", "ppc64le"),
                  ("linux", "s390x"), ("darwin", "amd64"), ("darwin", "arm64"))
WINDOWS_FORBIDDEN = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)), *(f"LPT{i}" for i in range(1, 10))}
SEMVER = re.compile(r"^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")


build_binary = script_module(BUILD.name)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- krew's rules ------------------------------------------------------------------------------

def validate_manifest(manifest: dict, file_name: str) -> None:
    """krew's validate-krew-manifest (structural validation, line lengths, platform coverage and
    overlap), plus this project's own: version and uri follow the package and the release pattern."""
    assert file_name.endswith(".yaml"), "krew manifests end in .yaml"
    name = file_name[: -len(".yaml")]
    assert manifest.get("apiVersion") == "krew.googlecontainertools.github.com/v1alpha2"
    assert manifest.get("kind") == "Plugin"
    assert re.fullmatch(r"[\w-]+", name) and name.upper() not in WINDOWS_FORBIDDEN, name
    assert (manifest.get("metadata") or {}).get("name") == name, "plugin should be named after its file"
    spec = manifest.get("spec") or {}
    short = spec.get("shortDescription") or ""
    assert short and "\n" not in short and "\r" not in short and len(short) <= 70
    assert spec.get("description") and all(len(line) <= 80 or " " not in line.strip()
                                           for line in spec["description"].splitlines())
    assert spec.get("homepage", "").startswith("https://")
    assert SEMVER.match(spec.get("version") or ""), spec.get("version")
    platforms = spec.get("platforms") or []
    assert platforms, "should have a platform specified"
    for platform in platforms:
        assert platform.get("uri", "").startswith("https://")
        assert re.fullmatch(r"[a-f0-9]{64}", str(platform.get("sha256") or "")), platform.get("sha256")
        assert platform.get("bin")
        files = platform.get("files")
        assert files is None or (files and all(op.get("from") and op.get("to") for op in files))
        selector = platform.get("selector")
        assert selector and (selector.get("matchLabels") or selector.get("matchExpressions"))
        keys = list(selector.get("matchLabels") or {}) + [e["key"] for e in selector.get("matchExpressions") or []]
        assert set(keys) <= {"os", "arch"}, keys
        assert any(selector_matches(selector, o, a) for o, a in KREW_PLATFORMS), "selects no platform"
    for os_, arch in KREW_PLATFORMS:
        matching = [i for i, p in enumerate(platforms) if selector_matches(p["selector"], os_, arch)]
        assert len(matching) <= 1, f"overlapping selectors {matching} for {os_}/{arch}"


def test_committed_manifest_passes_krews_rules():
    from kubectl_kvdtype import __version__

    manifest = yaml.safe_load(MANIFEST.read_text())
    # krew-index keeps it as plugins/<name>.yaml; the name is kubectl-<name>'s, the binary's.
    validate_manifest(manifest, "kvdtype.yaml")
    assert f"kubectl-{manifest['metadata']['name']}" == build_binary.BINARY
    spec = manifest["spec"]
    assert spec["version"] == f"v{__version__}"
    pairs = []
    for platform in spec["platforms"]:
        labels = platform["selector"]["matchLabels"]
        pairs.append((labels["os"], labels["arch"]))
        assert platform["uri"] == (f"https://github.com/gpustack/kubectl-kvdtype/releases/download/v{__version__}/"
                                   f"kubectl-kvdtype_{__version__}_{labels['os']}_{labels['arch']}.tar.gz")
        assert platform["bin"] == "kubectl-kvdtype"
        assert [op["from"] for op in platform["files"]] == ["kubectl-kvdtype", "_internal", "LICENSE"]
        assert all(op["to"] == "." for op in platform["files"])
    assert sorted(pairs) == sorted(build_binary.PLATFORMS)
    # It is exactly what the release step writes for this version.
    assert MANIFEST.read_text() == build_binary.render_manifest(
        __version__, build_binary.manifest_sha256s(MANIFEST.read_text(), __version__))


@pytest.mark.parametrize("fault", ["name", "sha256-case", "version", "overlap", "selector-key", "no-files-op",
                                   "short-newline"])
def test_the_rules_catch_a_broken_manifest(fault):
    manifest = yaml.safe_load(MANIFEST.read_text())
    broken = copy.deepcopy(manifest)
    platform = broken["spec"]["platforms"][0]
    if fault == "name":
        broken["metadata"]["name"] = "kubectl-kvdtype"
    elif fault == "sha256-case":
        platform["sha256"] = "A" * 64
    elif fault == "version":
        broken["spec"]["version"] = "0.1.0"
    elif fault == "overlap":
        platform["selector"] = {"matchLabels": {"os": "linux"}}
    elif fault == "selector-key":
        platform["selector"]["matchLabels"]["libc"] = "glibc"
    elif fault == "no-files-op":
        platform["files"] = [{"from": "LICENSE"}]
    elif fault == "short-newline":
        broken["spec"]["shortDescription"] = "two\nlines"
    validate_manifest(manifest, "kvdtype.yaml")
    with pytest.raises(AssertionError):
        validate_manifest(broken, "kvdtype.yaml")


@pytest.mark.e2e  # the release script as a subprocess
def test_release_step_fills_uri_and_sha256_from_the_archives(tmp_path):
    from kubectl_kvdtype import __version__

    manifest = tmp_path / "plugin.yaml"
    shutil.copy(MANIFEST, manifest)
    before = yaml.safe_load(manifest.read_text())
    archive = tmp_path / f"kubectl-kvdtype_{__version__}_darwin_arm64.tar.gz"
    archive.write_bytes(b"not really an archive, but its sha256 is what counts")
    run = [sys.executable, str(BUILD), "--update-manifest", str(tmp_path), "--manifest", str(manifest)]
    result = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    after = yaml.safe_load(manifest.read_text())
    validate_manifest(after, "kvdtype.yaml")
    for old, new in zip(before["spec"]["platforms"], after["spec"]["platforms"], strict=True):
        labels = new["selector"]["matchLabels"]
        expected = _sha256(archive) if (labels["os"], labels["arch"]) == ("darwin", "arm64") else old["sha256"]
        assert new["sha256"] == expected
    strict = subprocess.run([*run, "--require-all"], capture_output=True, text=True, timeout=60)
    assert strict.returncode == 1 and "missing archives" in strict.stderr


WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
KREW_TEMPLATE = ROOT / ".krew.yaml"
#: Runner labels GitHub-hosted runners offer for each platform (macos-13 is gone; darwin/amd64 runs
#: on the Intel macOS 15 image).
CURRENT_RUNNERS = {("linux", "amd64"): {"ubuntu-24.04", "ubuntu-22.04", "ubuntu-latest"},
                   ("linux", "arm64"): {"ubuntu-24.04-arm", "ubuntu-22.04-arm"},
                   ("darwin", "amd64"): {"macos-15-intel", "macos-26-intel"},
                   ("darwin", "arm64"): {"macos-15", "macos-14", "macos-26", "macos-latest"}}
#: The first major of each action that runs on node24 (node20 is being removed from the runners).
NODE24_MAJORS = {"actions/checkout": 5, "actions/setup-python": 6, "actions/upload-artifact": 6,
                 "actions/download-artifact": 7}


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def _runs(job: dict) -> list[str]:
    return [str(step["run"]) for step in job["steps"] if "run" in step]


def test_release_workflow_builds_every_platform_and_fills_the_manifest():
    workflow = _workflow()
    assert workflow[True]["push"]["tags"]  # YAML 1.1 reads the key `on` as True
    matrix = workflow["jobs"]["build"]["strategy"]["matrix"]["include"]
    assert sorted((m["os"], m["arch"]) for m in matrix) == sorted(build_binary.PLATFORMS)
    steps = " ".join(_runs(workflow["jobs"]["build"]))
    assert "scripts/build-binary" in steps
    release = " ".join(_runs(workflow["jobs"]["release"]))
    assert "--update-manifest dist --require-all" in release and "plugin.yaml" in release


def test_release_workflow_runs_on_current_runners_and_node24_actions():
    workflow = _workflow()
    for entry in workflow["jobs"]["build"]["strategy"]["matrix"]["include"]:
        assert entry["runner"] in CURRENT_RUNNERS[(entry["os"], entry["arch"])], entry
    assert workflow["jobs"]["release"]["runs-on"] in CURRENT_RUNNERS[("linux", "amd64")]
    used = [step["uses"] for job in workflow["jobs"].values() for step in job["steps"] if "uses" in step]
    for action in used:
        name, _, ref = action.partition("@")
        if name in NODE24_MAJORS:
            assert re.fullmatch(r"v\d+", ref) and int(ref[1:]) >= NODE24_MAJORS[name], action
    assert {a.partition("@")[0] for a in used} >= set(NODE24_MAJORS)
    setup = [s for s in workflow["jobs"]["build"]["steps"] if str(s.get("uses", "")).startswith("actions/setup-python")]
    assert setup[0]["with"]["python-version"] == "3.11"  # the release Python README.md names


def test_release_workflow_smoke_tests_the_extracted_archive_and_the_onefile():
    workflow = _workflow()
    build = _runs(workflow["jobs"]["build"])
    smoke = [run for run in build if "--smoke-test" in run]
    platform = "${{ matrix.os }}_${{ matrix.arch }}"
    # The archive's smoke test checks its entries and runs it extracted (scripts/build-binary
    # smoke_test); the onefile's runs it where it was built.
    assert smoke == [f".venv/bin/python scripts/build-binary --smoke-test dist/kubectl-kvdtype_*_{platform}.tar.gz",
                     f".venv/bin/python scripts/build-binary --smoke-test dist/kubectl-kvdtype_*_{platform}"]
    # ...after the build step that writes them, and before anything is uploaded.
    assert build.index(smoke[0]) > next(i for i, run in enumerate(build) if "scripts/build-binary\n" in run + "\n")
    steps = workflow["jobs"]["build"]["steps"]
    upload = next(i for i, s in enumerate(steps) if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert all(steps.index(s) < upload for s in steps if "--smoke-test" in str(s.get("run", "")))
    uploaded = steps[upload]["with"]["path"].splitlines()
    assert uploaded == [f"dist/kubectl-kvdtype_*_{platform}.tar.gz", f"dist/kubectl-kvdtype_*_{platform}"]
    publish = next(r for r in _runs(workflow["jobs"]["release"]) if "gh release create" in r)
    assert "dist/kubectl-kvdtype_* " in publish  # the archives and the onefiles


def test_release_job_opens_the_krew_index_update_from_the_krew_template():
    steps = _workflow()["jobs"]["release"]["steps"]
    publish = next(i for i, s in enumerate(steps) if "gh release create" in str(s.get("run", "")))
    bot = [i for i, s in enumerate(steps) if str(s.get("uses", "")).startswith("rajatjindal/krew-release-bot@")]
    assert len(bot) == 1 and bot[0] > publish, "the bot reads the archives of the published release"
    assert re.fullmatch(r"rajatjindal/krew-release-bot@v\d+\.\d+\.\d+", steps[bot[0]]["uses"])
    assert steps[bot[0]]["with"]["krew_template_file"] == KREW_TEMPLATE.name


def render_krew_template(text: str, tag: str, sha256_of: "callable") -> str:
    """What krew-release-bot does with .krew.yaml for a tag: Go-template actions {{ .TagName }} and
    {{addURIAndSha "URI" .TagName }}; the URI is itself a template of .TagName and .Version (the
    tag's dotted digits), and its action becomes `uri: URI` and `sha256: <the archive's sha256>`
    (4 spaces in). Any other template action is left unrendered, and so fails here."""
    version = re.search(r"\d+(\.\d+)+", tag).group(0)

    def uri_and_sha(match: re.Match) -> str:
        uri = match.group(1).replace("{{ .TagName }}", tag).replace("{{ .Version }}", version)
        return f"uri: {uri}\n    sha256: {sha256_of(uri)}"

    rendered = re.sub(r'\{\{\s*addURIAndSha "([^"]*)" \.TagName\s*\}\}', uri_and_sha, text)
    rendered = re.sub(r"\{\{\s*\.TagName\s*\}\}", tag, rendered)
    assert "{{" not in rendered and "}}" not in rendered, rendered
    return rendered


def _archives(directory: Path, version: str) -> dict[str, Path]:
    """One stand-in archive per platform, as the release publishes them, by download uri."""
    directory.mkdir(parents=True, exist_ok=True)
    by_uri = {}
    for os_, arch in build_binary.PLATFORMS:
        archive = directory / build_binary.archive_name(version, os_, arch)
        archive.write_bytes(f"{os_}/{arch} archive of {version}".encode())
        by_uri[build_binary.RELEASE_URI.format(version=version, os=os_, arch=arch)] = archive
    return by_uri


def test_krew_template_is_generated_from_the_manifest_data():
    assert KREW_TEMPLATE.read_text() == build_binary.render_krew_template(), \
        ".krew.yaml is stale: run scripts/regenerate"


@pytest.mark.e2e  # runs the release script
def test_rendered_krew_manifest_passes_krews_rules_and_is_the_released_plugin_yaml(tmp_path):
    from kubectl_kvdtype import __version__

    by_uri = _archives(tmp_path / "dist", __version__)
    rendered = render_krew_template(KREW_TEMPLATE.read_text(), f"v{__version__}", lambda uri: _sha256(by_uri[uri]))
    manifest = yaml.safe_load(rendered)
    validate_manifest(manifest, "kvdtype.yaml")  # krew-index keeps it as plugins/kvdtype.yaml
    # The same manifest as the release step writes into plugin.yaml from the same archives.
    released = tmp_path / "plugin.yaml"
    shutil.copy(MANIFEST, released)
    subprocess.run([sys.executable, str(BUILD), "--update-manifest", str(tmp_path / "dist"), "--require-all",
                    "--manifest", str(released)], check=True, capture_output=True, timeout=60)
    assert manifest == yaml.safe_load(released.read_text())
    assert {p["sha256"] for p in manifest["spec"]["platforms"]} == {_sha256(a) for a in by_uri.values()}


def test_krew_template_renders_for_a_later_version(tmp_path):
    by_uri = _archives(tmp_path, "1.12.0")
    manifest = yaml.safe_load(render_krew_template(KREW_TEMPLATE.read_text(), "v1.12.0",
                                                   lambda uri: _sha256(by_uri[uri])))
    validate_manifest(manifest, "kvdtype.yaml")
    assert manifest["spec"]["version"] == "v1.12.0"
    assert sorted(p["uri"] for p in manifest["spec"]["platforms"]) == sorted(by_uri)


def test_the_bots_rendering_catches_a_broken_template():
    broken = KREW_TEMPLATE.read_text().replace("{{ .Version }}_linux_amd64", "{{ .Version | lower }}_linux_amd64")
    with pytest.raises(AssertionError):
        render_krew_template(broken, "v0.1.0", lambda uri: "0" * 64)
    wrong = KREW_TEMPLATE.read_text().replace("_{{ .Version }}_darwin_arm64", "_{{ .TagName }}_darwin_arm64")
    manifest = yaml.safe_load(render_krew_template(wrong, "v0.1.0", lambda uri: "0" * 64))
    assert manifest != yaml.safe_load(build_binary.render_manifest("0.1.0", {}))


FAKE_BINARY = """#!/bin/sh
case "$1" in
  --version) echo "kubectl-kvdtype v{version}" ;;
  check) echo '{{"kind": "CheckReport", "items": [], "findings": []}}'; exit 1 ;;
esac
"""


@pytest.mark.e2e  # runs the release script on a stand-in binary
@pytest.mark.parametrize("version_ok", [True, False])
def test_smoke_test_rejects_a_binary_that_does_not_work(tmp_path, version_ok):
    from kubectl_kvdtype import __version__

    fake = tmp_path / "kubectl-kvdtype"
    fake.write_text(FAKE_BINARY.format(version=__version__ if version_ok else "0.0.0"))
    fake.chmod(0o755)
    result = subprocess.run([sys.executable, str(BUILD), "--smoke-test", str(fake)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 1
    assert ("check -f examples/" if version_ok else "--version") in result.stderr


def _tar(path: Path, entries: list[tuple[str, str, bytes]]) -> Path:
    """A .tar.gz of (name, kind, data) entries: kind "file", "dir", "symlink" (data: its target) or
    "hardlink" (data: the member it links to)."""
    kinds = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE}
    with tarfile.open(path, "w:gz") as tar:
        for name, kind, data in entries:
            info = tarfile.TarInfo(name)
            info.type, info.mode = kinds[kind], 0o755
            if kind == "file":
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                continue
            info.linkname = data.decode() if kind in ("symlink", "hardlink") else ""
            tar.addfile(info)
    return path


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_an_archive_with_links_is_refused_before_anything_runs(tmp_path, capsys, kind):
    from kubectl_kvdtype import __version__

    binary = FAKE_BINARY.format(version=__version__).encode()
    good = [("kubectl-kvdtype", "file", binary), ("_internal", "dir", b""), ("_internal/libz.so.1", "file", b"z")]
    assert build_binary.not_krew_entries(_tar(tmp_path / "good.tar.gz", good)) == []
    linked = _tar(tmp_path / "linked.tar.gz", [*good, ("_internal/libz.so", kind, b"_internal/libz.so.1")])
    refused = build_binary.not_krew_entries(linked)
    assert refused == [f"_internal/libz.so ({'symbolic' if kind == 'symlink' else 'hard'} link)"]
    assert build_binary.smoke_test(linked) == 1
    assert "_internal/libz.so" in capsys.readouterr().err


def test_the_archive_dereferences_the_links_pyinstaller_made(tmp_path):
    folder = tmp_path / "kubectl-kvdtype"
    (folder / "_internal" / "Versions" / "3.11").mkdir(parents=True)
    (folder / "kubectl-kvdtype").write_bytes(b"\x7fELF the executable")
    (folder / "kubectl-kvdtype").chmod(0o755)
    (folder / "_internal" / "libssl.so.3").write_bytes(b"the library")
    (folder / "_internal" / "libssl.so").symlink_to("libssl.so.3")
    (folder / "_internal" / "Versions" / "3.11" / "Python").write_bytes(b"libpython")
    (folder / "_internal" / "Versions" / "Current").symlink_to("3.11")
    license_ = tmp_path / "LICENSE"
    license_.write_text("the license")
    archive = tmp_path / "a.tar.gz"
    build_binary.write_archive(archive, folder, {"LICENSE": (license_, 0o644)}, 315532800)
    assert build_binary.not_krew_entries(archive) == []
    with tarfile.open(archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
        read = {name: tar.extractfile(m).read() for name, m in members.items() if m.isreg()}
    assert read["_internal/libssl.so"] == read["_internal/libssl.so.3"] == b"the library"
    assert read["_internal/Versions/Current/Python"] == b"libpython"
    assert members["_internal/Versions/Current"].isdir()
    assert members["kubectl-kvdtype"].mode == 0o755 and members["LICENSE"].mode == 0o644
    names = list(members)
    assert names == sorted(names) and names.index("_internal") < names.index("_internal/libssl.so")


@pytest.fixture(scope="session")
def krew_binary() -> Path:
    """The real krew, built by scripts/control-plane into its cache when missing."""
    script = _control_plane_script()
    return Path(script.ensure(script.BY_NAME["krew"], log=lambda line: print(line, file=sys.stderr)).path)


def real_krew(krew_binary: Path, root: Path, env: dict, *args: str, os_: str = "", arch: str = "") -> \
        subprocess.CompletedProcess:
    """``kubectl krew ARGS`` with the real krew as kubectl's plugin, in KREW_ROOT ``root``; ``os_``
    and ``arch`` set KREW_OS and KREW_ARCH (krew's own override of the platform it installs for)."""
    shim = root.parent / f"{root.name}-krew-bin"
    shim.mkdir(parents=True, exist_ok=True)
    if not (shim / "kubectl-krew").exists():
        (shim / "kubectl-krew").symlink_to(krew_binary)
    # `krew uninstall` (and list, info, search) insist on a local index: a git clone under
    # index/; nothing else of it is read for a plugin installed from a manifest.
    (root / "index" / "default" / ".git").mkdir(parents=True, exist_ok=True)
    run_env = dict(env, KREW_ROOT=str(root), PATH=os.pathsep.join([str(root / "bin"), str(shim), "/usr/bin", "/bin"]))
    for name, value in (("KREW_OS", os_), ("KREW_ARCH", arch)):
        run_env.pop(name, None)
        if value:
            run_env[name] = value
    return subprocess.run([kubectl_path(), "krew", *args], env=run_env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120)


def _krew_root_listing(root: Path) -> dict:
    return {part: sorted(p.name for p in (root / part).iterdir()) for part in ("bin", "receipts", "store")}


@pytest.mark.e2e  # runs krew
@pytest.mark.parametrize("os_, arch", build_binary.PLATFORMS)
def test_krew_installs_the_archives_layout_on_every_platform(tmp_path, krew_binary, os_, arch):
    """Each platform's manifest entry installs an archive of the release layout (a stand-in of the
    one-folder build, as scripts/build-binary writes it) with the real krew told it runs there:
    the executable with _internal beside it and the LICENSE, bin linked to the executable."""
    from kubectl_kvdtype import __version__

    folder = tmp_path / "kubectl-kvdtype"
    (folder / "_internal" / "kubectl_kvdtype").mkdir(parents=True)
    (folder / "kubectl-kvdtype").write_text(FAKE_BINARY.format(version=__version__))
    (folder / "kubectl-kvdtype").chmod(0o755)
    (folder / "_internal" / "kubectl_kvdtype" / "__init__.pyc").write_bytes(b"stand-in")
    extras = {name: (build_binary.MANPAGE if name.endswith(".1") else ROOT / name, mode)
              for name, mode in build_binary.ARCHIVE_EXTRAS.items()}
    archive = tmp_path / build_binary.archive_name(__version__, os_, arch)
    build_binary.write_archive(archive, folder, extras, 315532800)
    manifest = tmp_path / "plugin.yaml"
    manifest.write_text(build_binary.render_manifest(__version__, {(os_, arch): _sha256(archive)}))
    root = tmp_path / "root"
    done = real_krew(krew_binary, root, dict(os.environ, HOME=str(tmp_path)), "install", f"--manifest={manifest}",
                     f"--archive={archive}", os_=os_, arch=arch)
    assert done.returncode == 0, done.stderr
    link = root / "bin" / "kubectl-kvdtype"
    installed = link.resolve().parent
    assert installed == root / "store" / "kvdtype" / f"v{__version__}"
    assert sorted(p.name for p in installed.iterdir()) == sorted(build_binary.INSTALLED)
    assert link.resolve() == installed / "kubectl-kvdtype" and os.access(link, os.X_OK)
    assert (installed / "_internal" / "kubectl_kvdtype" / "__init__.pyc").read_bytes() == b"stand-in"


# --- The binary ----------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def source(tmp_path_factory) -> dict:
    """The work tree as it is when the session starts (tracked and untracked, not ignored files),
    copied, so that two builds see one source even while someone edits the tree; with the
    commit's time as SOURCE_DATE_EPOCH, as scripts/build-binary takes it from git."""
    pytest.importorskip("PyInstaller", reason="PyInstaller is not installed: pip install -e '.[build]'")
    copy_ = tmp_path_factory.mktemp("source")
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "-z"],
                            capture_output=True, timeout=60)
    names = [n for n in listed.stdout.decode().split("\0") if n] if listed.returncode == 0 else []
    if names:
        for name in names:
            if (ROOT / name).is_file():
                (copy_ / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, copy_ / name)
    else:  # not a git checkout
        shutil.copytree(ROOT, copy_, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".git", ".venv", "dist", "build", "__pycache__", "*.egg-info"))
    return {"root": copy_, "epoch": str(build_binary.source_date_epoch())}


def _build(source: dict, dist: Path) -> dict:
    env = dict(os.environ, SOURCE_DATE_EPOCH=source["epoch"])
    result = subprocess.run([sys.executable, str(source["root"] / "scripts" / "build-binary"), "--dist", str(dist)],
                            capture_output=True, text=True, timeout=900, cwd=str(source["root"]), env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    from kubectl_kvdtype import __version__

    os_, arch = build_binary.host_platform()
    return {"folder": dist / "kubectl-kvdtype", "onefile": dist / build_binary.onefile_name(__version__, os_, arch),
            "archive": dist / build_binary.archive_name(__version__, os_, arch), "os": os_, "arch": arch}


@pytest.fixture(scope="session")
def built(source, tmp_path_factory) -> dict:
    """scripts/build-binary, once per session: the one-folder build, its archive and the onefile."""
    return _build(source, tmp_path_factory.mktemp("dist"))


def _release_manifest(archive: Path, manifest: Path) -> Path:
    """plugin.yaml as the release step fills it from ``archive``."""
    shutil.copy(MANIFEST, manifest)
    subprocess.run([sys.executable, str(BUILD), "--update-manifest", str(archive.parent), "--manifest",
                    str(manifest)], check=True, capture_output=True, timeout=60)
    return manifest


@pytest.fixture(scope="session")
def krew_installed(built, krew_binary, tmp_path_factory) -> dict:
    """The freshly built archive, released into a manifest and installed by the real krew."""
    work = tmp_path_factory.mktemp("krew")
    manifest = _release_manifest(built["archive"], work / "plugin.yaml")
    root = work / "root"
    done = real_krew(krew_binary, root, dict(os.environ, HOME=str(work)), "install", f"--manifest={manifest}",
                     f"--archive={built['archive']}")
    assert done.returncode == 0, done.stderr
    link = root / "bin" / "kubectl-kvdtype"
    return {**built, "link": link, "bindir": link.parent, "manifest": manifest, "root": root}


def _krew_env(kube_env: dict, bindir: Path) -> dict:
    """PATH with the krew bin directory and the system, not the venv (no kubectl-kvdtype there)."""
    return dict(kube_env, PATH=os.pathsep.join([str(bindir), "/usr/local/bin", "/usr/bin", "/bin"]))


@pytest.mark.e2e  # builds the binary
@pytest.mark.parametrize("asset", ["archive", "onefile"])
def test_smoke_test_passes_on_the_built_archive_and_onefile(built, asset):
    """The steps release.yml runs on every platform's archive (from where it is extracted) and
    onefile, run here on this platform's."""
    result = subprocess.run([sys.executable, str(BUILD), "--smoke-test", str(built[asset])], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "smoke test passed" in result.stdout


@pytest.mark.e2e  # builds the binary
def test_the_archive_is_written_from_the_one_folder_build_and_the_epoch_alone(source, built, tmp_path):
    """The binary is built once per run (CI's time): the archive, written again from the same
    one-folder build and epoch, has the same sha256; so two builds that make one folder make one
    archive."""
    with tarfile.open(built["archive"]) as tar:
        tar.extractall(tmp_path / "extras", members=[tar.getmember(n) for n in build_binary.ARCHIVE_EXTRAS],
                       filter="data")
    extras = {name: (tmp_path / "extras" / name, mode) for name, mode in build_binary.ARCHIVE_EXTRAS.items()}
    again = tmp_path / built["archive"].name
    build_binary.write_archive(again, built["folder"], extras, int(source["epoch"]))
    assert _sha256(again) == _sha256(built["archive"])


@pytest.mark.e2e  # builds the binary
def test_archive_is_a_reproducible_tarball_of_the_one_folder_build(built):
    raw = built["archive"].read_bytes()
    assert raw[:2] == b"\x1f\x8b" and raw[4:8] == b"\0\0\0\0", "gzip mtime must be 0"
    assert build_binary.not_krew_entries(built["archive"]) == []
    with tarfile.open(built["archive"]) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    top = {name.split("/")[0] for name in names}
    assert top == {"kubectl-kvdtype", "_internal", "LICENSE", "kubectl-kvdtype.1", "kubectl_complete-kvdtype"}
    modes = {m.name: m.mode for m in members}
    assert modes["kubectl-kvdtype"] == modes["kubectl_complete-kvdtype"] == 0o755 and modes["LICENSE"] == 0o644
    assert any(re.fullmatch(r"_internal/libpython3\.\d+\.so(\.1\.0)?", n) for n in names), "libpython beside it"
    assert len({m.mtime for m in members}) == 1
    assert all(m.uid == 0 and m.gid == 0 and not m.uname and not m.gname for m in members)
    # Every file of the one-folder build is in the archive, links dereferenced.
    folder = {p.relative_to(built["folder"]).as_posix() for p in built["folder"].rglob("*")}
    assert folder <= set(names)
    assert built["archive"].stat().st_size < 28 * 1024 * 1024  # ~20 MB to download


def test_krew_installed_binary_runs_through_kubectl(krew_installed, kube_env):
    from kubectl_kvdtype import __version__

    env = _krew_env(kube_env, krew_installed["bindir"])
    assert shutil.which("kubectl-kvdtype", path=env["PATH"]) == str(krew_installed["link"])
    version = subprocess.run([kubectl_path(), "kvdtype", "--version"], env=env, capture_output=True, text=True,
                             timeout=60)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"kubectl-kvdtype v{__version__}"
    offline = subprocess.run([kubectl_path(), "kvdtype", "check", "-f", str(EXAMPLES), "-o", "json"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert offline.returncode == 1, offline.stderr  # the examples hold error findings on purpose
    venv = subprocess.run([str(Path(sys.executable).parent / "kubectl-kvdtype"), "check", "-f", str(EXAMPLES),
                           "-o", "json"], env=kube_env, capture_output=True, text=True, timeout=60)
    assert json.loads(offline.stdout) == json.loads(venv.stdout)


@pytest.mark.e2e  # builds the binary, runs krew
def test_the_real_krew_installs_runs_and_uninstalls_the_archive(built, krew_binary, kube_env, tmp_path):
    """What a user does with a release: `kubectl krew install --manifest=plugin.yaml --archive=...`
    (the manifest's sha256 filled from that archive by the release step), the plugin through
    kubectl, then `kubectl krew uninstall kvdtype`, which leaves nothing of it behind."""
    from kubectl_kvdtype import __version__

    manifest = _release_manifest(built["archive"], tmp_path / "plugin.yaml")
    root = tmp_path / "root"
    unfilled = real_krew(krew_binary, root, kube_env, "install", f"--manifest={MANIFEST}",
                         f"--archive={built['archive']}")  # plugin.yaml as committed: sha256 zeros
    assert unfilled.returncode != 0 and "checksum" in unfilled.stderr.lower(), unfilled.stderr
    installed = real_krew(krew_binary, root, kube_env, "install", f"--manifest={manifest}",
                          f"--archive={built['archive']}")
    assert installed.returncode == 0, installed.stderr
    assert "Installed plugin: kvdtype" in installed.stderr
    env = _krew_env(kube_env, root / "bin")
    version = subprocess.run([kubectl_path(), "kvdtype", "--version"], env=env, capture_output=True, text=True,
                             timeout=60)
    assert version.returncode == 0 and version.stdout.strip() == f"kubectl-kvdtype v{__version__}", version.stderr
    offline = subprocess.run([kubectl_path(), "kvdtype", "check", "-f", str(EXAMPLES), "-o", "json"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert offline.returncode == 1, offline.stderr  # the examples hold error findings on purpose
    assert json.loads(offline.stdout)["kind"] == "CheckReport"
    listed = real_krew(krew_binary, root, kube_env, "list")
    assert listed.returncode == 0 and "kvdtype" in listed.stdout, listed.stderr
    removed = real_krew(krew_binary, root, kube_env, "uninstall", "kvdtype")
    assert removed.returncode == 0, removed.stderr
    assert _krew_root_listing(root) == {"bin": [], "receipts": [], "store": []}
    gone = subprocess.run([kubectl_path(), "kvdtype", "--version"], env=env, capture_output=True, text=True, timeout=60)
    assert gone.returncode != 0


def test_binary_linked_as_the_completion_helper_completes(krew_installed, kube_env):
    helper = krew_installed["bindir"] / "kubectl_complete-kvdtype"
    helper.symlink_to(krew_installed["link"].resolve())
    env = _krew_env(kube_env, krew_installed["bindir"])
    result = subprocess.run([kubectl_path(), "__complete", "kvdtype", "ch"], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.stdout.splitlines()[0].split("\t")[0] == "check"
    assert result.stdout.splitlines()[-1] == ":4"


@pytest.mark.e2e  # builds the binary
def test_krew_upgrades_a_onefile_release_to_the_one_folder_one(built, tmp_path, kube_env):
    """A user who installed the onefile release (files: the binary and LICENSE) upgrades: the new
    version's files (the executable and _internal/) replace the old, bin is relinked, and
    .krew.yaml renders the same manifest as plugin.yaml."""
    from kubectl_kvdtype import __version__

    old_version = "0.0.9"
    old_archive = tmp_path / "old" / build_binary.archive_name(old_version, built["os"], built["arch"])
    old_archive.parent.mkdir()
    with tarfile.open(old_archive, "w:gz", compresslevel=1) as tar:
        tar.add(built["onefile"], arcname="kubectl-kvdtype")
        tar.add(ROOT / "LICENSE", arcname="LICENSE")
    sha256s = {(built["os"], built["arch"]): _sha256(old_archive)}
    old = yaml.safe_load(build_binary.render_manifest(old_version, sha256s))
    for platform in old["spec"]["platforms"]:
        platform["files"] = [{"from": "kubectl-kvdtype", "to": "."}, {"from": "LICENSE", "to": "."}]
    (tmp_path / "old.yaml").write_text(yaml.safe_dump(old))
    root = tmp_path / "root"
    link = krew_install(tmp_path / "old.yaml", old_archive, root, built["os"], built["arch"])
    assert sorted(p.name for p in link.resolve().parent.iterdir()) == ["LICENSE", "kubectl-kvdtype"]

    new = _release_manifest(built["archive"], tmp_path / "plugin.yaml")
    rendered = render_krew_template(KREW_TEMPLATE.read_text(), f"v{__version__}", lambda uri: _sha256(built["archive"]))
    ours = _selector_platform(yaml.safe_load(new.read_text()), built)
    assert ours == _selector_platform(yaml.safe_load(rendered), built)
    assert ours["files"] != old["spec"]["platforms"][0]["files"]
    link = krew_install(new, built["archive"], root, built["os"], built["arch"])
    installed = link.resolve().parent
    assert installed == root / "store" / "kvdtype" / f"v{__version__}"
    assert sorted(p.name for p in (root / "store" / "kvdtype").iterdir()) == [f"v{__version__}"]  # old one gone
    assert sorted(p.name for p in installed.iterdir()) == sorted(build_binary.INSTALLED)
    result = subprocess.run([kubectl_path(), "kvdtype", "--version"], env=_krew_env(kube_env, link.parent),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == f"kubectl-kvdtype v{__version__}", result.stderr


def _selector_platform(manifest: dict, built: dict) -> dict:
    return next(p for p in manifest["spec"]["platforms"] if selector_matches(p["selector"], built["os"], built["arch"]))


# --- Hardened hosts: noexec TMPDIR, /tmp and HOME ----------------------------------------------------

#: Where the private mount namespace puts KREW_ROOT: an existing directory outside /tmp and HOME,
#: covered there by a tmpfs that allows execution (a plugin cannot run from a noexec KREW_ROOT,
#: krew's or anyone's: on such hosts KREW_ROOT is set to an executable file system).
EXEC_MOUNT_POINTS = ("/srv", "/media", "/opt", "/mnt")


@pytest.fixture(scope="session")
def private_mounts() -> list[str]:
    """The command that runs a shell script in a private mount namespace, or a skip saying why the
    mounts it needs are refused here (not root, no unshare, a container without CAP_SYS_ADMIN)."""
    unshare = shutil.which("unshare")
    if not unshare:
        pytest.skip("unshare (util-linux) is not installed: no private mount namespace")
    command = [unshare, "--mount", "--propagation", "private", "sh", "-c"]
    probe = subprocess.run([*command, "mount -t tmpfs -o noexec kvdtype-probe /tmp"], capture_output=True,
                           text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"a private mount namespace with a tmpfs on /tmp is refused here: {probe.stderr.strip()}")
    return command


#: In the namespace: an executable tmpfs for KREW_ROOT, then empty noexec tmpfs mounts on /tmp, on
#: TMPDIR and on HOME (both inside the new /tmp, each its own mount); then INSIDE.
NOEXEC_MOUNTS = r"""set -e
mount -t tmpfs -o mode=0755 kvdtype-krew "$KREW_MOUNT"
cp "$ARCHIVE" "$MANIFEST" "$ONEFILE" "$KREW_MOUNT/"
cp "$KREW" "$KREW_MOUNT/krew-bin"
# The tests may run from under /tmp (a clone there, its venv, kubectl): keep the real /tmp in reach
# at $KREW_MOUNT/outside, and point what runs inside at it, before /tmp is hidden.
mkdir "$KREW_MOUNT/outside"
mount --bind /tmp "$KREW_MOUNT/outside"
for name in PYTHON KUBECTL EXAMPLES; do
  eval "value=\$$name"
  case "$value" in /tmp/*) eval "export $name=\"\$KREW_MOUNT/outside/\${value#/tmp/}\"";; esac
done
mount -t tmpfs -o noexec,nosuid,nodev,mode=1777 kvdtype-tmp /tmp
mkdir /tmp/home /tmp/tmpdir
mount -t tmpfs -o noexec,nosuid,nodev,mode=0700 kvdtype-home /tmp/home
mount -t tmpfs -o noexec,nosuid,nodev,mode=0700 kvdtype-tmpdir /tmp/tmpdir
export HOME=/tmp/home TMPDIR=/tmp/tmpdir
exec "$PYTHON" -c "$INSIDE"
"""
#: Installs the archive with the real krew (which unpacks it under the noexec TMPDIR and moves it to
#: KREW_ROOT), runs it through kubectl, runs the onefile, tries to execute a copy of `true` on each
#: noexec mount, and lists every _MEI* directory left anywhere a PyInstaller bootloader could unpack to.
INSIDE = r"""
import json, os, shutil, subprocess, sys
from pathlib import Path

mount = Path(os.environ["KREW_MOUNT"])
kubectl = os.environ["KUBECTL"]
shim = mount / "shim"
shim.mkdir()
(shim / "kubectl-krew").symlink_to(mount / "krew-bin")
install = subprocess.run([kubectl, "krew", "install", f"--manifest={mount / 'plugin.yaml'}",
                          f"--archive={mount / os.path.basename(os.environ['ARCHIVE'])}"],
                         env=dict(os.environ, KREW_ROOT=str(mount / "krew"), PATH=f"{shim}:/usr/bin:/bin"),
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
if install.returncode != 0:
    print(json.dumps({"install": {"status": install.returncode, "stderr": install.stderr}}))
    sys.exit(0)
link = mount / "krew" / "bin" / "kubectl-kvdtype"
env = dict(os.environ, PATH=os.pathsep.join([str(link.parent), "/usr/bin", "/bin"]))

def run(argv):
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    return {"status": done.returncode, "stdout": done.stdout, "stderr": done.stderr}

def executes(directory):
    copy = Path(directory) / "true"
    shutil.copy("/bin/true", copy)
    copy.chmod(0o755)
    try:
        return subprocess.run([str(copy)], timeout=30).returncode == 0
    except PermissionError:
        return False

# The krew tmpfs itself is searched at its top and under KREW_ROOT: its "outside" is the real /tmp,
# shared with the rest of the machine, not this run's.
roots = ["/tmp", os.environ["TMPDIR"], os.environ["HOME"], "/var/tmp", str(mount / "krew"), os.getcwd()]
outside = str(mount / "outside")
results = {
    "install": {"status": install.returncode, "stderr": install.stderr},
    "version": run([kubectl, "kvdtype", "--version"]),
    "check": run([kubectl, "kvdtype", "check", "-f", os.environ["EXAMPLES"], "-o", "json"]),
    "onefile": run([str(mount / os.path.basename(os.environ["ONEFILE"])), "--version"]),
    "executes": {d: executes(d) for d in ("/tmp", os.environ["TMPDIR"], os.environ["HOME"])},
    "mei": sorted({str(p) for root in roots if not root.startswith(outside) for p in Path(root).rglob("_MEI*")
                   if not str(p).startswith(outside)} | {str(p) for p in mount.glob("_MEI*")}),
}
print(json.dumps(results))
"""


def test_installed_binary_starts_with_tmpdir_tmp_and_home_on_noexec_mounts(built, krew_binary, private_mounts,
                                                                          kube_env):
    """The hardened host of CIS benchmarks: the krew-installed plugin starts and judges the
    examples, and nothing is unpacked anywhere; the onefile, in the same place, cannot start."""
    from kubectl_kvdtype import __version__

    target = next((d for d in EXEC_MOUNT_POINTS if Path(d).is_dir()), None)
    if target is None:
        pytest.skip(f"none of {', '.join(EXEC_MOUNT_POINTS)} exists to mount KREW_ROOT's tmpfs on")
    manifest = _release_manifest(built["archive"], built["archive"].parent / "plugin.yaml")
    env = dict(kube_env, KREW_MOUNT=target, ARCHIVE=str(built["archive"]), MANIFEST=str(manifest),
               ONEFILE=str(built["onefile"]), KREW=str(krew_binary), PYTHON=sys.executable, INSIDE=INSIDE,
               KUBECTL=kubectl_path(), EXAMPLES=str(EXAMPLES))
    env.pop("KUBECONFIG")
    done = subprocess.run([*private_mounts, NOEXEC_MOUNTS], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(done.stdout)
    assert results["install"]["status"] == 0, results["install"]
    assert results["executes"] == {"/tmp": False, "/tmp/tmpdir": False, "/tmp/home": False}, "the mounts are noexec"
    assert results["version"]["status"] == 0, results["version"]
    assert results["version"]["stdout"].strip() == f"kubectl-kvdtype v{__version__}"
    assert results["check"]["status"] == 1, results["check"]  # the examples hold error findings on purpose
    report = json.loads(results["check"]["stdout"])
    assert report["kind"] == "CheckReport" and report["items"] and report["findings"]
    assert results["mei"] == []
    # The same host defeats the onefile: its bootloader unpacks to the noexec TMPDIR and cannot load it.
    assert results["onefile"]["status"] != 0 and not results["onefile"]["stdout"], results["onefile"]


# --- Every credential path, from the installed binary ----------------------------------------------------

def _run_installed(krew_installed: dict, env: dict, *args: str) -> subprocess.CompletedProcess:
    """``kubectl kvdtype ARGS`` with the krew-installed binary first on PATH."""
    return subprocess.run([kubectl_path(), "kvdtype", *args], env=_krew_env(env, krew_installed["bindir"]),
                          capture_output=True, text=True, timeout=60)


def _judged_the_examples(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 1, result.stderr  # the examples hold error findings on purpose
    report = json.loads(result.stdout)
    assert report["kind"] == "CheckReport" and len(report["items"]) == len(
        [o for o in documents(EXAMPLES) if o.get("kind") == "KVCachePoolBinding"])


def _authenticated(fake) -> list:
    return [r for r in fake.requests if r.path not in ("/version", "/healthz", "/livez", "/readyz")]


def test_installed_binary_authenticates_with_a_token(krew_installed, kube_env, fake):
    seed(fake, documents(EXAMPLES))
    fake.clear_log()
    installed = _run_installed(krew_installed, kube_env, "check", "-A", "-o", "json")
    _judged_the_examples(installed)
    assert {r.headers.get("Authorization") for r in _authenticated(fake)} == {f"Bearer {fake.token}"}
    venv = subprocess.run([str(Path(sys.executable).parent / "kubectl-kvdtype"), "check", "-A", "-o", "json"],
                          env=kube_env, capture_output=True, text=True, timeout=60)
    assert json.loads(installed.stdout) == json.loads(venv.stdout)


def test_installed_binary_authenticates_with_a_client_certificate(krew_installed, kube_env, fake, tmp_path):
    from fakekube import TEST_CLIENT_CERT_PEM, TEST_CLIENT_KEY_PEM

    path = fake.write_kubeconfig(tmp_path / "cert.kubeconfig")
    config = json.loads(path.read_text())
    config["users"][0]["user"] = {"client-certificate-data": base64.b64encode(TEST_CLIENT_CERT_PEM.encode()).decode(),
                                  "client-key-data": base64.b64encode(TEST_CLIENT_KEY_PEM.encode()).decode()}
    path.write_text(json.dumps(config))
    seed(fake, documents(EXAMPLES))
    fake.clear_log()
    _judged_the_examples(_run_installed(krew_installed, dict(kube_env, KUBECONFIG=str(path)), "check", "-A",
                                        "-o", "json"))
    assert {r.client_cert for r in _authenticated(fake)} == {"ci-bot"}
    assert all("Authorization" not in r.headers for r in fake.requests)


def test_installed_binary_refreshes_an_oidc_id_token(krew_installed, kube_env, tmp_path):
    """The OIDC refresh loads the client's ApiClient and pydantic, which nothing else imports: the
    bundle must hold them."""
    from _oidc import FRESH_EXP, identity_provider, jwt, oidc_user
    from fakekube import FakeKube

    fresh = jwt({"iss": "test", "exp": FRESH_EXP})
    with identity_provider(fresh) as (issuer, grants), FakeKube(token=fresh) as fake:
        seed(fake, documents(EXAMPLES))
        path = fake.write_kubeconfig(tmp_path / "oidc.kubeconfig")
        config = json.loads(path.read_text())
        config["users"][0]["user"] = oidc_user(issuer)
        path.write_text(json.dumps(config))
        env = dict(kube_env, KUBECONFIG=str(path), OAUTHLIB_INSECURE_TRANSPORT="1")
        _judged_the_examples(_run_installed(krew_installed, env, "check", "-A", "-o", "json"))
        assert [g.get("refresh_token") for g in grants] == [["refresh-1"]]
        assert {r.headers.get("Authorization") for r in _authenticated(fake)} == {f"Bearer {fresh}"}


#: In a private mount namespace: the service account's files where every Pod has them, then the
#: installed binary with no kubeconfig.
IN_CLUSTER = r"""set -e
mount -t tmpfs -o mode=0755 kvdtype-run /run
account=/var/run/secrets/kubernetes.io/serviceaccount
mkdir -p "$account"
printf '%s' "$ACCOUNT_TOKEN" > "$account/token"
printf '%s' "$ACCOUNT_CA" > "$account/ca.crt"
printf 'team-a' > "$account/namespace"
exec "$BINARY" check -A -o json
"""


def test_installed_binary_uses_the_in_cluster_service_account(krew_installed, private_mounts, kube_env, fake,
                                                               tmp_path):
    seed(fake, documents(EXAMPLES))
    fake.clear_log()
    port = fake.url.rsplit(":", 1)[1]
    env = {k: v for k, v in kube_env.items() if k != "KUBECONFIG"}
    env.update(HOME=str(tmp_path / "empty-home"), KUBERNETES_SERVICE_HOST="127.0.0.1", KUBERNETES_SERVICE_PORT=port,
               ACCOUNT_TOKEN=fake.token, ACCOUNT_CA=fake.ca_pem, BINARY=str(krew_installed["link"]))
    _judged_the_examples(subprocess.run([*private_mounts, IN_CLUSTER], env=env, capture_output=True, text=True,
                                        timeout=60))
    # The in-cluster loader spells the scheme "bearer" (the apiserver reads it case-insensitively).
    assert {r.headers.get("Authorization", "").lower() for r in _authenticated(fake)} == {f"bearer {fake.token}"}


EXEC_PLUGIN = """#!/bin/sh
env > "$KVDTYPE_TEST_RECORD"
printf '%s' '{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
  "status": {"token": "fake-token"}}'
"""


@pytest.mark.parametrize("user_value", ["/opt/user-libs:/usr/local/lib/custom", None])
def test_installed_binary_runs_exec_credential_plugins_in_the_users_environment(krew_installed, fake, kube_env,
                                                                                tmp_path, user_value):
    """The bootloader points the loader's search path at the bundle's libraries: an exec plugin
    (aws, gke-gcloud-auth-plugin, kubelogin) gets the user's LD_LIBRARY_PATH and DYLD_LIBRARY_PATH
    back, or none, and no PyInstaller variable."""
    plugin = tmp_path / "exec-credential"
    plugin.write_text(EXEC_PLUGIN)
    plugin.chmod(0o755)
    record = tmp_path / "env.txt"
    env = dict(kube_env, KUBECONFIG=str(fake.write_kubeconfig(tmp_path / "exec.kubeconfig",
                                                              exec_command=[str(plugin)])),
               KVDTYPE_TEST_RECORD=str(record))
    for name in ("LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH"):
        env.pop(name, None)
        if user_value is not None:
            env[name] = user_value
    seed(fake, documents(EXAMPLES))
    fake.clear_log()
    _judged_the_examples(_run_installed(krew_installed, env, "check", "-A", "-o", "json"))
    assert any(r.headers.get("Authorization") == "Bearer fake-token" for r in fake.requests)
    seen = dict(line.split("=", 1) for line in record.read_text().splitlines() if "=" in line)
    assert seen.get("LD_LIBRARY_PATH") == user_value, seen.get("LD_LIBRARY_PATH")
    assert seen.get("DYLD_LIBRARY_PATH") == user_value, seen.get("DYLD_LIBRARY_PATH")
    assert not [name for name in seen if name.startswith("_PYI_") or name.endswith("_ORIG") or name == "_MEIPASS2"]
    installed = str(krew_installed["link"].resolve().parent)
    assert not [name for name, value in seen.items() if installed in value], "the bundle leaked into the plugin's env"

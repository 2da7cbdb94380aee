"""The krew release: plugin.yaml against krew's validate-krew-manifest rules, the release step that
fills it, and the PyInstaller onefile binary (built once per session, only where PyInstaller is
installed: `pip install -e '.[build]'`; .ci/run does) installed the way
`kubectl krew install --manifest=plugin.yaml --archive=...` installs it."""

from __future__ import annotations

import copy
import hashlib
import importlib.machinery
import importlib.util
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

from _support import EXAMPLES, ROOT, documents, seed
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


def _load_build_script():
    loader = importlib.machinery.SourceFileLoader("build_binary", str(BUILD))
    spec = importlib.util.spec_from_loader("build_binary", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


build_binary = _load_build_script()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- krew's rules ------------------------------------------------------------------------------

def _selector_matches(selector: dict, os_: str, arch: str) -> bool:
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
        assert any(_selector_matches(selector, o, a) for o, a in KREW_PLATFORMS), "selects no platform"
    for os_, arch in KREW_PLATFORMS:
        matching = [i for i, p in enumerate(platforms) if _selector_matches(p["selector"], os_, arch)]
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
        assert {op["from"] for op in platform["files"]} >= {"kubectl-kvdtype", "LICENSE"}
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


def test_release_workflow_smoke_tests_with_the_build_scripts_smoke_test():
    build = _runs(_workflow()["jobs"]["build"])
    smoke = [run for run in build if "--smoke-test" in run]
    assert smoke == [".venv/bin/python scripts/build-binary --smoke-test dist/kubectl-kvdtype"]
    # ...after the build step that writes dist/kubectl-kvdtype.
    assert build.index(smoke[0]) > next(i for i, run in enumerate(build) if "scripts/build-binary\n" in run + "\n")


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
        "regenerate it: scripts/build-binary --krew-template"


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
    return {"binary": dist / "kubectl-kvdtype",
            "archive": dist / f"kubectl-kvdtype_{__version__}_{os_}_{arch}.tar.gz", "os": os_, "arch": arch}


@pytest.fixture(scope="session")
def built(source, tmp_path_factory) -> dict:
    """scripts/build-binary, once per session (~30-60 s)."""
    return _build(source, tmp_path_factory.mktemp("dist"))


def krew_install(manifest_path: Path, archive: Path, krew_root: Path, os_: str, arch: str) -> Path:
    """What `kubectl krew install --manifest=M --archive=A` does: pick the platform, check the
    archive's sha256, unpack, apply `files`, link `bin` as kubectl-<name> into $KREW_ROOT/bin."""
    manifest = yaml.safe_load(manifest_path.read_text())
    name, version = manifest["metadata"]["name"], manifest["spec"]["version"]
    chosen = [p for p in manifest["spec"]["platforms"] if _selector_matches(p["selector"], os_, arch)]
    assert len(chosen) == 1, f"no single platform for {os_}/{arch}"
    platform = chosen[0]
    assert _sha256(archive) == platform["sha256"], "checksum does not match"
    staging = krew_root / "tmp" / name
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            assert not member.name.startswith("/") and ".." not in Path(member.name).parts
            assert member.isfile() or member.isdir(), "krew archives hold no links"
        tar.extractall(staging)
    install = krew_root / "store" / name / version
    install.mkdir(parents=True)
    for op in platform.get("files") or [{"from": "*", "to": "."}]:
        matched = list(staging.glob(op["from"]))
        assert matched, f"files: {op['from']} matches nothing in the archive"
        for source in matched:
            target = install / op["to"] / source.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(source), target)
    binary = install / platform["bin"]
    assert binary.is_file() and os.access(binary, os.X_OK), "bin is not in the archive"
    (krew_root / "bin").mkdir(exist_ok=True)
    link = krew_root / "bin" / f"kubectl-{name}"
    link.symlink_to(binary)
    (krew_root / "receipts").mkdir(exist_ok=True)
    shutil.copy(manifest_path, krew_root / "receipts" / f"{name}.yaml")
    return link


@pytest.fixture(scope="session")
def krew_installed(built, tmp_path_factory) -> dict:
    """The freshly built archive, released into a manifest and installed as krew would."""
    work = tmp_path_factory.mktemp("krew")
    manifest = work / "plugin.yaml"
    shutil.copy(MANIFEST, manifest)
    subprocess.run([sys.executable, str(BUILD), "--update-manifest", str(built["archive"].parent), "--manifest",
                    str(manifest)], check=True, capture_output=True, timeout=60)
    link = krew_install(manifest, built["archive"], work / "root", built["os"], built["arch"])
    return {**built, "link": link, "bindir": link.parent}


def _krew_env(kube_env: dict, bindir: Path) -> dict:
    """PATH with the krew bin directory and the system, not the venv (no kubectl-kvdtype there)."""
    return dict(kube_env, PATH=os.pathsep.join([str(bindir), "/usr/local/bin", "/usr/bin", "/bin"]))


@pytest.mark.e2e  # builds the binary
def test_smoke_test_passes_on_the_built_binary(built):
    """The step release.yml runs on every platform's binary, run here on this platform's."""
    result = subprocess.run([sys.executable, str(BUILD), "--smoke-test", str(built["binary"])], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "smoke test passed" in result.stdout


@pytest.mark.e2e  # builds the binary
def test_two_builds_of_one_commit_have_one_sha256(source, built, tmp_path):
    again = _build(source, tmp_path / "dist")
    assert _sha256(again["binary"]) == _sha256(built["binary"])
    assert _sha256(again["archive"]) == _sha256(built["archive"])


@pytest.mark.e2e  # builds the binary
def test_archive_is_a_reproducible_tarball(built):
    raw = built["archive"].read_bytes()
    assert raw[:2] == b"\x1f\x8b" and raw[4:8] == b"\0\0\0\0", "gzip mtime must be 0"
    with tarfile.open(built["archive"]) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert {"kubectl-kvdtype", "LICENSE", "kubectl-kvdtype.1", "kubectl_complete-kvdtype"} == set(names)
    assert len({m.mtime for m in members}) == 1
    assert all(m.uid == 0 and m.gid == 0 and not m.uname and not m.gname for m in members)
    assert {m.name: m.mode for m in members}["kubectl-kvdtype"] == 0o755
    assert built["binary"].stat().st_size < 48 * 1024 * 1024  # ~35 MB: stored uncompressed, to start faster
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


def test_krew_installed_binary_talks_to_a_cluster_with_the_kubernetes_client(krew_installed, kube_env, fake):
    seed(fake, documents(EXAMPLES))
    env = _krew_env(kube_env, krew_installed["bindir"])
    frozen = subprocess.run([kubectl_path(), "kvdtype", "check", "-A", "-o", "json"], env=env, capture_output=True,
                            text=True, timeout=60)
    assert frozen.returncode == 1, frozen.stderr
    fake.clear_log()
    venv = subprocess.run([str(Path(sys.executable).parent / "kubectl-kvdtype"), "check", "-A", "-o", "json"],
                          env=kube_env, capture_output=True, text=True, timeout=60)
    assert json.loads(frozen.stdout) == json.loads(venv.stdout)
    assert json.loads(frozen.stdout)["items"]


def test_binary_linked_as_the_completion_helper_completes(krew_installed, kube_env):
    helper = krew_installed["bindir"] / "kubectl_complete-kvdtype"
    helper.symlink_to(krew_installed["link"].resolve())
    env = _krew_env(kube_env, krew_installed["bindir"])
    result = subprocess.run([kubectl_path(), "__complete", "kvdtype", "ch"], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.stdout.splitlines()[0].split("\t")[0] == "check"
    assert result.stdout.splitlines()[-1] == ":4"


EXEC_PLUGIN = """#!/bin/sh
env > "$KVDTYPE_TEST_RECORD"
printf '%s' '{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
  "status": {"token": "fake-token"}}'
"""


@pytest.mark.parametrize("user_value", ["/opt/user-libs:/usr/local/lib/custom", None])
def test_frozen_binary_runs_exec_credential_plugins_in_the_users_environment(built, fake, kube_env, tmp_path,
                                                                             user_value):
    plugin = tmp_path / "exec-credential"
    plugin.write_text(EXEC_PLUGIN)
    plugin.chmod(0o755)
    record = tmp_path / "env.txt"
    env = dict(kube_env, KUBECONFIG=str(fake.write_kubeconfig(tmp_path / "exec.kubeconfig",
                                                              exec_command=[str(plugin)])),
               KVDTYPE_TEST_RECORD=str(record))
    env.pop("LD_LIBRARY_PATH", None)
    if user_value is not None:
        env["LD_LIBRARY_PATH"] = user_value
    seed(fake, documents(EXAMPLES))
    fake.clear_log()
    result = subprocess.run([str(built["binary"]), "check", "-A", "-o", "json"], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["kind"] == "CheckReport"
    assert any(r.headers.get("Authorization") == "Bearer fake-token" for r in fake.requests)
    seen = dict(line.split("=", 1) for line in record.read_text().splitlines() if "=" in line)
    assert seen.get("LD_LIBRARY_PATH") == user_value, seen.get("LD_LIBRARY_PATH")
    assert not [name for name in seen if name.startswith("_PYI_") or name in ("_MEIPASS2", "LD_LIBRARY_PATH_ORIG")]

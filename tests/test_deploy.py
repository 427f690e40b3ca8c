"""deploy/ checked as Docker would read it, without Docker: the compose file interpolated and
resolved as `docker compose config` does, nginx's upstreams, the build context's ignore
rules, and the image's pinned dependencies (deploy/check.sh runs the real thing where it can)."""

from __future__ import annotations

import ast
import re
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
REQUIRED = {"TELEGRAM_BOT_TOKEN", "WEBHOOK_HOST", "POSTGRES_PASSWORD", "HUB_MODEL"}
OPTIONAL_UNDOCUMENTED = {"SQLITE_FILE"}  # given on the command line of the migrate step (deploy/README.md)

# -- `docker compose config`, as far as this compose file needs it ------------------------------------

_VARIABLE = re.compile(r"\$(?:\$|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\})")


class MissingSetting(Exception):
    """What `docker compose` stops with: a ${NAME:?message} whose NAME is unset or empty."""


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """Compose's interpolation: ``$$``, ``${NAME}``, ``${NAME:-default}``, ``${NAME-default}``, ``${NAME:?err}``, ``${NAME?err}``."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, op, arg = match["name"], match["op"], match["arg"] or ""
        present = name in env
        empty = not env.get(name)
        if op in (":?", "?") and (empty if op == ":?" else not present):
            raise MissingSetting(f"required variable {name} is missing a value: {arg}")
        if op in (":-", "-") and (empty if op == ":-" else not present):
            return arg
        return env.get(name, "")

    return _VARIABLE.sub(one, value)


def resolve(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [resolve(item, env) for item in node]
    if isinstance(node, dict):
        return {key: resolve(value, env) for key, value in node.items()}
    return node


def read_env_file(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def example_env(**changes: str | None) -> dict[str, str]:
    env = read_env_file(DEPLOY / ".env.example") | {"TELEGRAM_BOT_TOKEN": "123:abc", "POSTGRES_PASSWORD": "pw"}
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def compose(env: Mapping[str, str]) -> dict[str, Any]:
    """deploy/compose.yaml as `docker compose config` sees it (YAML anchors and merge keys included)."""
    return resolve(yaml.safe_load((DEPLOY / "compose.yaml").read_text()), env)


def test_compose_needs_every_required_setting_and_names_the_missing_one() -> None:
    config = compose(example_env())
    assert set(config["services"]) == {"postgres", "worker1", "worker2", "proxy", "backup", "migrate"}
    for name in sorted(REQUIRED):
        for missing in (example_env(**{name: None}), example_env(**{name: ""})):
            with pytest.raises(MissingSetting, match=f"required variable {name} is missing"):
                compose(missing)
    # The webhook secret is optional: empty, the workers make one and share it through the database.
    assert config["services"]["worker1"]["environment"]["TELEGRAM_WEBHOOK_SECRET"] == ""


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [text for item in node for text in _strings(item)]
    if isinstance(node, dict):
        return [text for value in node.values() for text in _strings(value)]
    return []


def test_every_setting_compose_reads_is_documented_in_its_env_example() -> None:
    texts = _strings(yaml.safe_load((DEPLOY / "compose.yaml").read_text()))
    used = {m["name"] for text in texts for m in _VARIABLE.finditer(text) if m["name"]}
    documented = set(read_env_file(DEPLOY / ".env.example"))
    assert used - documented == OPTIONAL_UNDOCUMENTED
    assert used >= REQUIRED


def test_the_workers_build_run_check_their_health_and_wait_for_the_database() -> None:
    config = compose(example_env(WEBHOOK_HOST="bot.example.org"))
    services = config["services"]
    for name in ("worker1", "worker2"):
        worker = services[name]
        assert (DEPLOY / worker["build"]["context"] / worker["build"]["dockerfile"]).resolve() == DEPLOY / "Dockerfile"
        assert worker["command"][:4] == ["agents-hub", "telegram", "--webhook-url", "https://bot.example.org/telegram"]
        assert worker["depends_on"] == {"postgres": {"condition": "service_healthy"}}
        assert worker["env_file"] == ".env"
        environment = worker["environment"]
        assert environment["HUB_DB"] == "postgresql://hub:pw@postgres:5432/hub" and environment["TELEGRAM_BOT_TOKEN"] == "123:abc"
        check = worker["healthcheck"]["test"]
        assert check[:3] == ["CMD", "python", "-c"] and "http://127.0.0.1:8443/healthz" in check[3]
        ast.parse(check[3])  # the health check's Python runs
    assert services["postgres"]["healthcheck"]["test"][0] == "CMD-SHELL"
    assert "pg_dump" in services["backup"]["entrypoint"][2] and services["backup"]["profiles"] == ["backup"]
    assert services["backup"]["entrypoint"][2].count("$(date") == 1  # $$ left for the shell, not for compose
    assert 'agents-hub migrate --from /import/agents-hub.db --to "$HUB_DB"' in services["migrate"]["entrypoint"][2]
    proxy = services["proxy"]
    version = Version(proxy["image"].split(":", 1)[1].split("-", 1)[0])
    assert version >= Version("1.27.3")  # upstream servers with "resolve"
    assert {volume.split(":")[0] for volume in proxy["volumes"]} == {"./nginx.conf", "./certs"}


def test_nginx_re_resolves_its_workers_and_serves_nothing_but_the_webhook() -> None:
    conf = re.sub(r"#[^\n]*", "", (DEPLOY / "nginx.conf").read_text())
    assert re.search(r"^\s*resolver\s+127\.0\.0\.11\s+valid=\d+s", conf, re.MULTILINE)
    upstream = re.search(r"upstream hub_workers \{(.*?)\}", conf, re.DOTALL)
    assert upstream is not None
    assert re.search(r"^\s*zone\s+hub_workers\s+\d+k;", upstream.group(1), re.MULTILINE)
    servers = re.findall(r"^\s*server\s+(\S+)([^;]*);", upstream.group(1), re.MULTILINE)
    workers = {name for name, service in compose(example_env())["services"].items() if service.get("command", [""])[:2] == ["agents-hub", "telegram"]}
    assert {address.split(":")[0] for address, _ in servers} == workers
    assert all("resolve" in options.split() for _, options in servers)
    locations = re.findall(r"location\s+(=?\s*\S+)\s*\{", conf)
    assert locations == ["= /telegram", "/"]
    assert re.search(r"location / \{\s*return 404;\s*\}", conf)
    assert "healthz" not in conf


# -- the build context -------------------------------------------------------------------------------


def _pattern(rule: str) -> re.Pattern[str]:
    """A .dockerignore rule as a regular expression over a path relative to the context's root.

    As Docker reads them: ``*`` and ``?`` stay within one path segment, ``**`` spans any
    number of them (``**/`` none too), and a rule without ``**`` is anchored at the root.
    """
    out, i = "", 0
    while i < len(rule):
        if rule.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif rule.startswith("**", i):
            out, i = out + ".*", i + 2
        elif rule[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif rule[i] == "?":
            out, i = out + "[^/]", i + 1
        elif rule[i] == "[":
            close = rule.index("]", i)
            out, i = out + rule[i : close + 1], close + 1
        else:
            out, i = out + re.escape(rule[i]), i + 1
    return re.compile(out + r"\Z")


def ignored(path: str, rules: list[str]) -> bool:
    """Docker's .dockerignore: the last matching rule wins; a directory's rule covers what is in it."""
    parts = path.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    verdict = False
    for rule in rules:
        negate = rule.startswith("!")
        pattern = _pattern(rule[1:] if negate else rule)
        if any(pattern.match(candidate) for candidate in candidates):
            verdict = not negate
    return verdict


def dockerignore() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip().strip("/") for line in lines if line.strip() and not line.startswith("#")]


def test_the_build_context_leaves_out_secrets_databases_environments_and_build_outputs() -> None:
    rules = dockerignore()
    for secret_or_junk in (
        ".env",
        ".env.production",
        "deploy/.env",
        "deploy/certs/privkey.pem",
        "deploy/backups/hub-20260101T000000Z.dump",
        ".venv/bin/python",
        ".venv-ci/lib/python3.12/site-packages/x.py",
        "build/lib/scopehub/hub/app.py",
        "dist/scopehub-0.1.0-py3-none-any.whl",
        "scopehub.egg-info/PKG-INFO",
        "agents-hub.db",
        "agents-hub.db-wal",
        "agents-hub-maildir/user:1/new/x",
        ".git/HEAD",
        "hub/__pycache__/app.cpython-312.pyc",
        "memory/postgres/__pycache__/copy.cpython-312.pyc",
        "eval/local.db",
        "deploy/agents-hub.db-shm",
        "tests/test_deploy.py",
    ):
        assert ignored(secret_or_junk, rules), secret_or_junk
    for needed in ("pyproject.toml", "README.md", "hub/app.py", "memory/_store.py", "deploy/constraints.txt", ".env.example"):
        assert not ignored(needed, rules), needed
    assert not (DEPLOY / "Dockerfile.dockerignore").exists()  # one set of rules, for every builder


def test_every_file_the_image_copies_is_in_the_context() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    sources = [source for line in re.findall(r"^COPY\s+(.+)$", dockerfile, re.MULTILINE) for source in line.split()[:-1]]
    assert sources == ["pyproject.toml", "README.md", "agents", "eval", "hub", "memory", "_build", "deploy/constraints.txt"]
    listed = ["git", "ls-files", "--cached", "--others", "--exclude-standard"]  # what a checkout (or a new file) holds
    tracked = subprocess.run(listed, cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    rules = dockerignore()
    for source in sources:
        files = [f for f in tracked if f == source or f.startswith(source + "/")]
        assert files and not [f for f in files if ignored(f, rules)], source
    assert re.search(r"pip install --no-cache-dir -c /tmp/constraints.txt '\.\[postgres\]'", dockerfile)


# -- the image's pinned dependencies --------------------------------------------------------------


def pins() -> dict[str, Version]:
    lines = [line.strip() for line in (DEPLOY / "constraints.txt").read_text().splitlines() if line.strip() and not line.startswith("#")]
    found = {}
    for line in lines:
        requirement = Requirement(line)
        (spec,) = requirement.specifier
        assert spec.operator == "==", line
        found[_canonical(requirement.name)] = Version(spec.version)
    return found


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(extras: set[str]) -> dict[str, list[Requirement]]:
    """Every package '.[extras]' needs on the image's Python (3.12), with the requirements that name it."""
    environment = {"python_version": "3.12", "python_full_version": "3.12.1", "sys_platform": "linux", "platform_system": "Linux"}
    wanted: dict[str, list[Requirement]] = {}
    queue: list[tuple[str, set[str]]] = [("scopehub", extras)]
    seen: set[tuple[str, frozenset[str]]] = set()
    while queue:
        name, with_extras = queue.pop()
        if (name, frozenset(with_extras)) in seen:
            continue
        seen.add((name, frozenset(with_extras)))
        for line in metadata.requires(name) or []:
            requirement = Requirement(line)
            if requirement.marker is not None and not any(
                requirement.marker.evaluate(environment | {"extra": extra}) for extra in (with_extras or {""})
            ):
                continue
            key = _canonical(requirement.name)
            wanted.setdefault(key, []).append(requirement)
            queue.append((requirement.name, set(requirement.extras)))
    return wanted


def test_the_image_pins_every_dependency_within_what_the_package_allows() -> None:
    pinned = pins()
    needed = _closure({"postgres"})
    assert {"python-telegram-bot", "litellm", "psycopg", "psycopg-binary", "apscheduler", "tornado"} <= set(needed)
    # pip comes with the base image (sqlite-utils names it for its own `install` command).
    assert set(needed) - set(pinned) - {"pip"} == set(), "unpinned dependencies of the image"
    needed.pop("pip", None)
    for name, requirements in needed.items():
        for requirement in requirements:
            assert requirement.specifier.contains(pinned[name], prereleases=True), f"{name}=={pinned[name]} breaks {requirement}"

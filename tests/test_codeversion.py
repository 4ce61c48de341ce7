"""Every module of the package has one role in convlab.codeversion, so that no edit escapes the
re-run it needs (an unlisted module would change results without re-running anything)."""

from __future__ import annotations

from collections import Counter

from convlab.codeversion import PACKAGE_DIR, ROLES, SHARED, fingerprint, role_files


def test_every_module_has_exactly_one_role():
    counts = Counter(path.relative_to(PACKAGE_DIR).as_posix() for role in ROLES for path in role_files(role))
    modules = {path.relative_to(PACKAGE_DIR).as_posix() for path in PACKAGE_DIR.rglob("*.py")}
    assert modules - set(counts) == set(), "modules with no role in codeversion.ROLES"
    assert set(counts) - modules == set(), "roles naming modules that do not exist"
    assert {name for name, n in counts.items() if n > 1} == SHARED


def test_report_and_harness_code_is_not_measurement_code():
    measuring = {path.name for role in ("measurement", "backend:cuda", "backend:cpu") for path in role_files(role)}
    assert not measuring & {"figures.py", "findings.py", "cli.py", "server.py", "aggregate.py", "config.py",
                             "inprocess.py", "devicelock.py"}


def test_the_fingerprint_follows_names_and_bytes(tmp_path):
    module = tmp_path / "a.py"
    module.write_text("x = 1\n")
    first = fingerprint([module], root=tmp_path)
    module.write_text("x = 1\n#\n")
    assert fingerprint([module], root=tmp_path) != first
    module.unlink()
    assert fingerprint([module], root=tmp_path) not in (first, "")

"""Every module of the package has one role in convlab.codeversion, so that no edit escapes the
re-run it needs (an unlisted module would change results without re-running anything)."""

from __future__ import annotations

from collections import Counter
from dataclasses import fields

from convlab.codeversion import PACKAGE_DIR, ROLES, SHARED, fingerprint, role_files
from convlab.plan.families import FAMILIES
from convlab.report.familydisplay import FamilyDisplay


def test_every_module_has_exactly_one_role():
    counts = Counter(path.relative_to(PACKAGE_DIR).as_posix() for role in ROLES for path in role_files(role))
    modules = {path.relative_to(PACKAGE_DIR).as_posix() for path in PACKAGE_DIR.rglob("*.py")}
    assert modules - set(counts) == set(), "modules with no role in codeversion.ROLES"
    assert set(counts) - modules == set(), "roles naming modules that do not exist"
    assert {name for name, n in counts.items() if n > 1} == SHARED


def test_report_and_harness_code_is_not_measurement_code():
    measuring = {path.name for role in ("measurement", "backend:cuda", "backend:cpu") for path in role_files(role)}
    assert not measuring & {"figures.py", "findings.py", "cli.py", "server.py", "aggregate.py", "config.py",
                             "inprocess.py", "devicelock.py", "familydisplay.py"}


def test_a_family_carries_none_of_the_reports_settings():
    """The family modules are measurement code: a setting only the report reads (a roofline marker) lives in
    the report's entry for the family, so that an edit to it re-measures no cell."""
    report_only = [entry.name for entry in fields(FamilyDisplay)]
    assert [(family.name, name) for family in FAMILIES.values() for name in report_only if hasattr(family, name)] == []


def test_the_fingerprint_follows_names_and_bytes(tmp_path):
    module = tmp_path / "a.py"
    module.write_text("x = 1\n")
    first = fingerprint([module], root=tmp_path)
    module.write_text("x = 1\n#\n")
    assert fingerprint([module], root=tmp_path) != first
    module.unlink()
    assert fingerprint([module], root=tmp_path) not in (first, "")

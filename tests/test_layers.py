"""The package's folders are its roles, stacked: each imports only its own floor and the ones below
(tests/importgraph.py draws the graph from the source). Imports inside functions count as imports, so
none can hide a circle."""

from __future__ import annotations

import importgraph


def test_no_module_imports_in_a_circle():
    graph = importgraph.build()
    assert importgraph.circles(sorted(graph.modules), graph.arrows) == []


def test_every_folder_has_a_floor_and_none_imports_a_floor_above_it():
    graph = importgraph.build()
    arrows = importgraph.room_arrows(graph)
    rooms = sorted({importgraph.room(module) for module in graph.modules})
    assert [r for r in rooms if not any(r in names for names in importgraph.LAYERS)] == []
    assert importgraph.back_arrows(arrows) == []
    assert importgraph.circles(rooms, arrows) == []


def test_type_only_imports_point_down_too():
    graph = importgraph.build()
    upward = [(a, b) for a, b in graph.type_only
              if importgraph.floor_of(importgraph.room(b)) > importgraph.floor_of(importgraph.room(a))]
    assert upward == []


def test_the_graph_sees_imports_inside_functions_and_reports_a_planted_circle(tmp_path):
    package = tmp_path / "convlab"
    (package / "low").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "low" / "__init__.py").write_text("")
    (package / "low" / "a.py").write_text("def f():\n    from convlab.high import b\n")
    (package / "high").mkdir()
    (package / "high" / "__init__.py").write_text("")
    (package / "high" / "b.py").write_text("from convlab.low import a\n")
    graph = importgraph.build(package)
    assert graph.in_functions == [("convlab.low.a", "convlab.high.b")]
    assert importgraph.circles(sorted(graph.modules), graph.arrows) == [["convlab.high.b", "convlab.low.a"]]

"""The order of a routine's statements (codegen/emit/schedule.py) and where a split kernel's parts read back the
values of earlier parts (codegen/emit/sources.py, ``_split``)."""

from __future__ import annotations

import sympy as sp

from codegen.emit import schedule, sources


def _recursion(links: int):
    """A Newton-Euler-like program: a forward pass (each link's six velocities and accelerations from its
    parent's), then a backward pass (each link's force from its child's and from its own forward values), one
    output per link. Depth first keeps all six of every link's forward values alive until the backward pass
    reaches that link, where one value per link (its own force term, computed early) would do."""
    q = sp.symbols(f"q0:{links}")
    values, outputs = [], []
    previous = [sp.Integer(1), sp.Integer(0), sp.Integer(0), sp.Integer(0), sp.Integer(0), sp.Integer(1)]
    forward = []
    for i in range(links):
        s, c = sp.Symbol(f"s{i}"), sp.Symbol(f"c{i}")
        values += [(s, sp.sin(q[i])), (c, sp.cos(q[i]))]
        current = []
        for k in range(6):
            w = sp.Symbol(f"v{i}_{k}")
            values.append((w, previous[k] * c + previous[(k + 1) % 6] * s + q[i] * previous[(k + 3) % 6]))
            current.append(w)
        own = sp.Symbol(f"e{i}")
        values.append((own, sp.Add(*[current[k] * current[k + 3] for k in range(3)])))
        forward.append((s, c, own))
        previous = current
    child = [sp.Integer(0)] * 2
    for i in reversed(range(links)):
        s, c, own = forward[i]
        force = [sp.Symbol(f"f{i}_0"), sp.Symbol(f"f{i}_1")]
        values += [(force[0], own + c * child[0] - s * child[1]), (force[1], s * child[0] + c * child[1])]
        outputs.append((f"out[{i}]", force[0]))
        child = force
    return values, outputs


def _valid(statements, values, outputs) -> None:
    """Every statement once, each after the values it reads."""
    assert sorted(str(item) for _, item, _ in statements) == sorted([str(s) for s, _ in values] +
                                                                     [t for t, _ in outputs])
    defined = {symbol for symbol, _ in values}
    seen: set = set()
    for kind, item, value in statements:
        assert value.free_symbols & defined <= seen, item
        if kind == "value":
            seen.add(item)


def test_every_order_writes_each_statement_after_what_it_reads():
    values, outputs = _recursion(6)
    graph = schedule._Graph(values, outputs, keep_outputs=False)
    first = schedule._depth_first(graph)
    position = {k: at for at, k in enumerate(first)}
    position = [position[k] for k in range(graph.n)]
    for found in (first, schedule._bottom_up(graph, position), schedule._top_down(graph, position)):
        _valid(graph.statements(found), values, outputs)
    for keep in (False, True):
        _valid(schedule.order(values, outputs, keep_outputs=keep), values, outputs)


def test_the_order_is_deterministic():
    values, outputs = _recursion(7)
    assert schedule.order(values, outputs) == schedule.order(list(values), list(outputs))


def test_a_recursion_is_reordered_where_the_model_spills_much_less():
    values, outputs = _recursion(12)
    graph = schedule._Graph(values, outputs, keep_outputs=False)
    triples, rooms = schedule._multiply_adds(graph)
    first = schedule._depth_first(graph)
    depth_first = graph.statements(first)
    chosen = schedule.order(values, outputs)
    assert chosen != depth_first
    index = {(kind, str(item)): k for k, (kind, item, _) in enumerate(graph.nodes)}
    cost = schedule._cost(graph, [index[(kind, str(item))] for kind, item, _ in chosen], triples, rooms)
    assert cost <= schedule._cost(graph, first, triples, rooms) - schedule.MARGIN


def test_a_small_program_keeps_its_depth_first_order():
    values, outputs = _recursion(2)
    graph = schedule._Graph(values, outputs, keep_outputs=False)
    assert schedule.order(values, outputs) == graph.statements(schedule._depth_first(graph))


def test_copies_and_numbers_take_no_register():
    x, a, b, c = sp.symbols("x a b c")
    values = [(a, sp.sin(x)), (b, -a), (c, sp.Float(0.5))]
    graph = schedule._Graph(values, [("out[0]", b * c + a)], keep_outputs=False)
    assert graph.alias == [None, 0, -1, None]
    assert graph.operands[3] == [0]


def test_a_later_part_reads_a_value_back_just_before_its_first_reader(monkeypatch):
    monkeypatch.setattr(sources, "_PART_OPERATIONS", 3)
    statements = ["    const double a = q[0]*q[1] + q[2]*q[3];",
                  "    const double b = q[1]*q[2] + q[0];",
                  "    const double c = q[2]*q[3];",
                  "    const double d = c*q[0] + a;",
                  "    out[0] = d*b;"]
    parts, spilled = sources._split(statements)
    assert spilled == 3 and len(parts) == 3
    assert parts[0] == ["    const double a = q[0]*q[1] + q[2]*q[3];", "    spill[0] = a;"]
    assert parts[2] == ["    const double c = spill[2];", "    const double a = spill[0];",
                        "    const double d = c*q[0] + a;", "    const double b = spill[1];", "    out[0] = d*b;"]

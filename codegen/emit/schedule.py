"""The order of a routine's statements, chosen to keep few values alive at once.

GCC at -O2 on x86-64 keeps straight-line code in its source order up to register allocation, and the routines
need many more than the 16 vector registers: the Panda's inverse dynamics keeps values of its forward pass until
the backward pass, and a third of its instructions were stack stores, reloads and register copies. The order of
the definitions decides how many there are. Three orders of the same statements (each after what it reads):

* depth first (``_depth_first``): each output as soon as what it reads is known, each intermediate just before
  its first use;
* bottom up (``_bottom_up``): list scheduling from the last statement back, each step placing the statement that
  makes fewest values live (its operands not yet live, less its own value); ties to the latest in depth-first order;
* top down (``_top_down``): list scheduling from the first statement on, each step writing the statement that
  adds fewest live values (its own, less the operands it is the last reader of); ties to the earliest.

``order`` keeps the depth-first order unless another one is clearly cheaper in a cost model (``_cost``: the
values an allocation of the registers to the values' live intervals spills, and the multiply-adds whose three
inputs all stay live, each a register copy). The best order differs with the algorithm: measured with callgrind
on the Panda (kernels, AVX2 build), bottom up took inverse dynamics from 1,594 to 1,488 instructions, forward
dynamics from 2,420 to 2,310 and the inverse-dynamics derivatives from 6,815 to 6,443; top down the Coriolis
matrix from 3,157 to 2,965; the mass matrix and gravity stay depth first (either other order cost them 1 to 8 %
more although the model counted slightly fewer spills: hence MARGIN). Each order and the model take time
linear in the statements, times a logarithm for the priority queues.
"""

from __future__ import annotations

import heapq

import sympy as sp

#: The registers the cost model allocates (x86-64 has 16 vector registers).
REGISTERS = 16
#: Another order replaces the depth-first one only if the model counts at least this many fewer spills and copies:
#: smaller differences are within what GCC's allocation does otherwise than the model (the Panda's mass matrix:
#: 9 fewer in the model top down, 7 more instructions).
MARGIN = 16


def _leaf(expr) -> bool:
    """A symbol, a number or the negation of one: no register of its own (a copy, or a constant)."""
    if expr.is_Atom:
        return True
    return expr.is_Mul and len(expr.args) == 2 and expr.args[0] is sp.S.NegativeOne and expr.args[1].is_Atom


class _Graph:
    """Statements 0..n-1 (the values, then the outputs), what each reads, and who reads each."""

    def __init__(self, values: list, outputs: list, keep_outputs: bool):
        self.nodes = [("value", symbol, value) for symbol, value in values] + [("output", t, v) for t, v in outputs]
        index = {symbol: k for k, (symbol, _) in enumerate(values)}
        n = self.n = len(self.nodes)
        self.values = len(values)
        self.reads = [sorted({index[s] for s in node[2].free_symbols if s in index}) for node in self.nodes]
        # A value that is a copy, a negated copy or a number takes no register: ``alias`` is the value its
        # readers read instead (-1 for a number), ``operands`` what a statement reads through them.
        alias: list = [None] * n
        for k in range(self.values):
            if _leaf(self.nodes[k][2]):
                source = self.reads[k]
                alias[k] = (alias[source[0]] if alias[source[0]] is not None else source[0]) if source else -1
        self.alias = alias
        self.operands = [sorted({r if alias[r] is None else alias[r] for r in self.reads[k]} - {-1})
                         if alias[k] is None else [] for k in range(n)]
        self.users: list[list[int]] = [[] for _ in range(n)]
        self.readers: list[list[int]] = [[] for _ in range(n)]  # through copies
        for k in range(n):
            for r in self.reads[k]:
                self.users[r].append(k)
            for r in self.operands[k]:
                self.readers[r].append(k)
        # Live after the block: declared outputs (read by the code after it) and values no statement here reads
        # (a later block's).
        self.kept = [alias[k] is None and (k >= self.values and keep_outputs or k < self.values and
                                           not self.readers[k]) for k in range(n)]

    def statements(self, order: list[int]) -> list:
        return [self.nodes[k] for k in order]


def order(values: list, outputs: list, keep_outputs: bool = False) -> list:
    """("value", symbol, expression) and ("output", target, expression) statements in the chosen order.
    ``keep_outputs``: the outputs are locals read after the block (they stay live)."""
    graph = _Graph(values, outputs, keep_outputs)
    first = _depth_first(graph)
    if graph.n < 2:
        return graph.statements(first)
    triples, rooms = _multiply_adds(graph)
    best, best_cost = first, _cost(graph, first, triples, rooms)
    position = [0] * graph.n
    for at, k in enumerate(first):
        position[k] = at
    for schedule in (_bottom_up(graph, position), _top_down(graph, position)):
        cost = _cost(graph, schedule, triples, rooms)
        if cost < best_cost and (best is not first or best_cost - cost >= MARGIN):
            best, best_cost = schedule, cost
    return graph.statements(best)


def _depth_first(graph: _Graph) -> list[int]:
    """Each output as soon as what it reads is known (outputs in the order of the last value they read), and each
    intermediate just before its first use, depth first; values no output reads at the end. (Written all
    intermediates first, outputs last, a long routine kept thousands of values alive at once: Solo12's C compiled
    in 2.6 s instead of 1.3 s.)"""
    outputs = range(graph.values, graph.n)
    done = [False] * graph.n
    schedule: list[int] = []
    for k in sorted(outputs, key=lambda k: (max(graph.reads[k], default=-1), k)):
        stack = [(r, False) for r in reversed(graph.reads[k])]
        while stack:
            node, expanded = stack.pop()
            if done[node]:
                continue
            if expanded:
                done[node] = True
                schedule.append(node)
                continue
            stack.append((node, True))
            stack.extend((r, False) for r in reversed(graph.reads[node]) if not done[r])
        schedule.append(k)
    schedule += [k for k in range(graph.values) if not done[k]]
    return schedule


def _top_down(graph: _Graph, position: list[int]) -> list[int]:
    """Top-down list scheduling (copies and numbers as soon as they can be written: they take no register)."""
    remaining = [len(readers) for readers in graph.readers]  # unscheduled readers of each register value
    defines = [1 if graph.alias[k] is None and (graph.kept[k] or (k < graph.values and remaining[k] > 0)) else 0
               for k in range(graph.n)]

    def added(k: int) -> int:
        return defines[k] - sum(1 for r in graph.operands[k] if remaining[r] == 1)

    def update(k: int) -> list[int]:
        """Count k's reads; the statements that now free a value (they read it last) are cheaper."""
        cheaper = []
        for r in graph.operands[k]:
            remaining[r] -= 1
            if remaining[r] == 1:
                cheaper += graph.readers[r]
        return cheaper

    return _list_schedule(graph, [len(r) for r in graph.reads], graph.users, added, update, position)


def _bottom_up(graph: _Graph, position: list[int]) -> list[int]:
    """Bottom-up list scheduling (copies and numbers just before their first reader)."""
    placed = [0] * graph.n  # placed readers of each register value

    def added(k: int) -> int:
        new = sum(1 for r in graph.operands[k] if placed[r] == 0)
        return new - (1 if graph.alias[k] is None and (placed[k] > 0 or graph.kept[k]) else 0)

    def update(k: int) -> list[int]:
        """Count k's reads; the other readers of a value that is now live are cheaper."""
        cheaper = []
        for r in graph.operands[k]:
            placed[r] += 1
            if placed[r] == 1:
                cheaper += graph.readers[r]
        return cheaper

    schedule = _list_schedule(graph, [len(u) for u in graph.users], graph.reads, added, update,
                              [-p for p in position])
    schedule.reverse()
    return schedule


def _list_schedule(graph: _Graph, waiting: list[int], follows: list[list[int]], added, update,
                   tie: list[int]) -> list[int]:
    """List scheduling: ``waiting[k]`` statements must come before k, ``follows[k]`` are those that wait for k;
    among the ready statements the least ``added(k)``, then the least ``tie[k]``. ``update(k)``, after k is
    placed, lists the statements whose cost has dropped. Copies and numbers are placed as soon as ready."""
    heap: list = []
    done = [False] * graph.n
    schedule: list[int] = []
    ready: list[int] = [k for k in range(graph.n) if waiting[k] == 0]

    def place(k: int) -> None:
        done[k] = True
        schedule.append(k)
        for u in follows[k]:
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)

    while True:
        while ready:
            k = ready.pop()
            if graph.alias[k] is None:
                heapq.heappush(heap, (added(k), tie[k], k))
            else:
                place(k)
        if not heap:
            return schedule
        cost, _, k = heapq.heappop(heap)
        if done[k] or cost != added(k):  # an outdated entry: the cost has dropped since
            continue
        cheaper = update(k)
        place(k)
        for u in cheaper:
            if not done[u] and waiting[u] == 0:
                heapq.heappush(heap, (added(u), tie[u], u))


def _shape(expr, triples: list) -> int:
    """The registers an expression's own temporaries take (Sethi-Ullman: a leaf is in a register or in memory);
    appends to ``triples`` the leaves of each of its multiply-adds of three non-temporaries (a + b*c: the first
    two terms of a sum, one a leaf, the other a product of two leaves)."""
    if expr.is_Atom or expr.is_Function or expr.is_Pow:
        return 0 if expr.is_Atom else 1
    args = expr.args
    if expr.is_Add:
        first, second = args[0], args[1]
        for a, b in ((first, second), (second, first)):
            if b.is_Mul and _leaf(a):
                factors = b.args[1:] if b.args[0] is sp.S.NegativeOne else b.args
                if len(factors) == 2 and factors[0].is_Atom and factors[1].is_Atom:
                    triples.append((a, *factors))
                    break
    elif len(args) == 2 and args[0] is sp.S.NegativeOne and args[1].is_Atom:
        return 0
    high = low = 0
    for arg in args:
        need = 0 if arg.is_Atom else _shape(arg, triples)
        if need > high:
            high, low = need, high
        elif need > low:
            low = need
    return max(1, high, low + 1 if low else 0)


def _multiply_adds(graph: _Graph) -> tuple[list[list[list[int]]], list[int]]:
    """Per statement, the register values read by each multiply-add of three non-temporaries (x86's multiply-add
    overwrites one of its inputs: unless one of them is read for the last time there, it needs a copy first); and
    the registers left while the statement runs (its own temporaries take the others)."""
    index = {node[1]: k for k, node in enumerate(graph.nodes) if node[0] == "value"}
    alias = graph.alias
    found: list[list[list[int]]] = []
    rooms: list[int] = []
    for k, (_, _, value) in enumerate(graph.nodes):
        leaves: list = []
        rooms.append(REGISTERS if alias[k] is not None else max(REGISTERS - _shape(value, leaves), 1))
        triples = []
        for triple in leaves:
            registers = set()
            for leaf in triple:
                symbol = leaf if leaf.is_Symbol else leaf.args[-1] if leaf.is_Mul else None
                r = index.get(symbol, -1)
                registers.add(r if r < 0 or alias[r] is None else alias[r])
            registers.discard(-1)
            if registers:
                triples.append(sorted(registers))
        found.append(triples)
    return found, rooms


def _cost(graph: _Graph, schedule: list[int], triples: list, rooms: list[int]) -> int:
    """Modelled spills and copies of a schedule. Spills: each value lives from its definition to its last
    reader; where more than the registers left by the statement's own temporaries are live, the one read
    furthest ahead goes to memory (optimal for intervals). Copies: ``_multiply_adds`` none of whose inputs dies."""
    n = graph.n
    at = [0] * n
    for step, k in enumerate(schedule):
        at[k] = step
    last = [-1] * n
    for k in range(n):
        for r in graph.operands[k]:
            last[r] = max(last[r], at[k])
    end = len(schedule)
    starts: dict[int, list] = {}
    for k in range(graph.values):
        if graph.alias[k] is None and (last[k] >= 0 or graph.kept[k]):
            starts.setdefault(at[k], []).append(end if graph.kept[k] else last[k])
    for k in range(graph.values, n):
        if graph.kept[k]:
            starts.setdefault(at[k], []).append(end)
    ends: list = []  # (end, id) of the values in registers, soonest first
    furthest: list = []  # (-end, id) of the same, for eviction
    alive: list[bool] = []
    count = spills = 0
    for step, k in enumerate(schedule):
        while ends and ends[0][0] < step:
            serial = heapq.heappop(ends)[1]
            if alive[serial]:
                alive[serial] = False
                count -= 1
        for finish in starts.get(step, ()):
            heapq.heappush(ends, (finish, len(alive)))
            heapq.heappush(furthest, (-finish, len(alive)))
            alive.append(True)
            count += 1
        room = rooms[k]
        while count > room:
            serial = heapq.heappop(furthest)[1]
            if alive[serial]:
                alive[serial] = False
                count -= 1
                spills += 1
    copies = sum(1 for k in range(n) for registers in triples[k]
                 if not any(last[r] == at[k] for r in registers))
    return spills + copies

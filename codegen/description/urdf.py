"""Stage 1, second front end: read a URDF file into a RobotDescription.

The URDF is parsed with the standard library's expat parser (the one behind
``xml.etree.ElementTree``) into a small element tree that remembers the line of
every start tag, so that each rejection is a DescriptionError naming the file,
the line and a field such as ``joint[panda_joint1].axis`` or
``link[panda_link3].inertial.inertia``.

What becomes of a URDF:

* ``revolute``, ``continuous`` (a revolute joint without position limits) and
  ``prismatic`` joints become model joints, ordered depth-first from the root
  link, so that ``Joint.parent`` always points backwards (-1: the base);
* ``fixed`` joints, and moving joints named in ``lock``, are merged away: the
  child link's inertial is added to the body that carries the parent link
  (mass sum, centre of mass, parallel-axis theorem, rotated into the body
  frame), and the fixed transform (for a locked joint: origin, then the joint
  motion at the locked position) is absorbed into the placement of the joints
  that follow;
* ``floating`` and ``planar`` joints, unknown types and unlocked ``mimic``
  joints are rejected;
* the root link is the fixed base (``base`` is the identity: the world frame is
  the root link's frame); whatever is rigidly attached to it does not move and
  is dropped, unchecked;
* a link without ``<inertial>`` is massless; a moving joint with nothing
  massive beyond it is rejected (M would be singular); the inertia tensor of
  every link that moves must be positive semi-definite (relative tolerance
  1e-9) and obey the triangle inequality (relative tolerance 1e-6: URDFs print
  rounded tensors), relative to its largest principal moment;
* numbers are baked as exact SymPy numbers: every decimal in the XML becomes
  the Rational it spells (``0.1`` -> 1/10); an angle that is a double within
  4 ulps of a multiple of pi/12 (such as ``1.5707963267948966``) becomes that
  exact multiple of pi, so that its sine and cosine are exact;
* gravity is ``[0, 0, -9.81]``, the tool is the identity on the link of the
  last joint.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping
from xml.parsers import expat

import numpy as np
import sympy as sp

from .. import geometry
from ..errors import DescriptionError
from .expressions import ExpressionError, parse_number_literal
from .model import Inertial, Joint, Limits, Parameter, RobotDescription

MOVING_TYPES = ("revolute", "continuous", "prismatic")
REJECTED_TYPES = ("floating", "planar")
# A URDF name ends up in C comments and JSON metadata: keep it printable and comment-safe.
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/\- ]*$")
_DECIMAL = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
_ROBOT_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")

PSD_TOLERANCE = 1e-9  # relative to the largest principal moment
TRIANGLE_TOLERANCE = 1e-6  # relative to the largest principal moment: real URDFs are rounded
ABSOLUTE_TOLERANCE = 1e-18  # kg m^2
LIMIT_TOLERANCE = 1e-9
DIGITS = 30  # precision of constants that cannot stay exact
GRAVITY = sp.ImmutableMatrix([0, 0, sp.Rational(-981, 100)])


# --- XML with line numbers ------------------------------------------------------------------------

@dataclass
class _Element:
    tag: str
    attrib: dict[str, str]
    line: int
    children: list["_Element"] = field(default_factory=list)

    def find_all(self, tag: str) -> list["_Element"]:
        return [child for child in self.children if child.tag == tag]


class _Rejected(Exception):
    def __init__(self, line: int, message: str):
        self.line = line
        self.message = message


MAX_XML_BYTES = 10_000_000  # the largest URDFs in the wild are a few hundred kilobytes
MAX_XML_ELEMENTS = 100_000
MAX_XML_DEPTH = 100
# Encodings expat reads itself (an XML declaration naming any other is refused: Python's fallback codecs
# fail in ways expat does not report, and no URDF needs them), by their lower-case aliases.
_XML_ENCODINGS = {"utf-8": "UTF-8", "utf8": "UTF-8", "us-ascii": "US-ASCII", "ascii": "US-ASCII",
                  "iso-8859-1": "ISO-8859-1", "latin-1": "ISO-8859-1", "latin1": "ISO-8859-1",
                  "utf-16": "UTF-16", "utf-16le": "UTF-16LE", "utf-16be": "UTF-16BE"}
_XML_DECLARATION = re.compile(rb"""^(?:\xef\xbb\xbf)?<\?xml[^>]{0,200}?\bencoding\s*=\s*["']([^"']{0,60})["']""")


def _xml_encoding(source: bytes, path: str) -> str | None:
    """The expat name of the encoding the XML declaration names (None without one)."""
    match = _XML_DECLARATION.match(source[:300])
    if match is None:
        return None
    declared = match.group(1).decode("latin-1")
    encoding = _XML_ENCODINGS.get(declared.strip().lower())
    if encoding is None:
        raise DescriptionError(path, 1, "", f"XML encoding {declared!r} is not supported "
                               "(write the URDF in UTF-8)")
    return encoding


def _parse_xml(source: str | bytes, path: str) -> _Element:
    """The element tree, with limits checked as it is read: file size, element count, nesting depth;
    entity declarations (expansion bombs, external files) and unknown encodings are refused."""
    size = len(source)
    if size > MAX_XML_BYTES:
        raise DescriptionError(path, None, "", f"the URDF is {size} {'bytes' if isinstance(source, bytes) else 'characters'} "
                               f"long; URDF files are limited to {MAX_XML_BYTES} bytes")
    encoding = _xml_encoding(source, path) if isinstance(source, bytes) else None
    parser = expat.ParserCreate(encoding)
    stack: list[_Element] = []
    roots: list[_Element] = []
    count = [0]

    def start(tag, attrib):
        count[0] += 1
        if count[0] > MAX_XML_ELEMENTS:
            raise _Rejected(parser.CurrentLineNumber, f"more than {MAX_XML_ELEMENTS} XML elements")
        if len(stack) >= MAX_XML_DEPTH:
            raise _Rejected(parser.CurrentLineNumber, f"XML elements nested deeper than {MAX_XML_DEPTH} levels")
        element = _Element(tag, dict(attrib), parser.CurrentLineNumber)
        if stack:
            stack[-1].children.append(element)
        else:
            roots.append(element)
        stack.append(element)

    def end(tag):
        stack.pop()

    def entity(name, *args):
        # No URDF needs entities; refusing them rules out entity expansion bombs and external files.
        raise _Rejected(parser.CurrentLineNumber, f"XML entity declarations are not allowed (entity {name!r})")

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.EntityDeclHandler = entity
    parser.UnparsedEntityDeclHandler = entity
    try:
        parser.Parse(source, True)
    except expat.ExpatError as exc:
        raise DescriptionError(path, exc.lineno, "", f"malformed XML: {expat.ErrorString(exc.code)} "
                               f"(column {exc.offset + 1})") from None
    except _Rejected as exc:
        raise DescriptionError(path, exc.line, "", exc.message) from None
    except (LookupError, UnicodeError, ValueError) as exc:  # a codec that expat's fallback could not use
        raise DescriptionError(path, parser.CurrentLineNumber, "", f"cannot decode the URDF: {exc}") from None
    return roots[0]


# --- numbers and fields ---------------------------------------------------------------------------

class _Reader:
    def __init__(self, path: str):
        self.path = path

    def error(self, element: _Element | None, field_: str, message: str) -> DescriptionError:
        return DescriptionError(self.path, None if element is None else element.line, field_, message)

    def numbers(self, element: _Element, attribute: str, count: int, field_: str,
                default: tuple | None = None, angles: bool = False) -> tuple[sp.Expr, ...]:
        text = element.attrib.get(attribute)
        if text is None:
            if default is None:
                raise self.error(element, field_, f"missing attribute '{attribute}'")
            return tuple(sp.Integer(v) for v in default)
        tokens = text.split()
        if len(tokens) != count:
            what = "a number" if count == 1 else f"{count} numbers separated by spaces"
            raise self.error(element, field_, f"expected {what} in {attribute}=\"{text}\", got {len(tokens)}")
        values = []
        for token in tokens:
            if not _DECIMAL.match(token):
                raise self.error(element, field_, f"{token!r} is not a number (in {attribute}=\"{text}\")")
            try:
                value = parse_number_literal(token)
            except ExpressionError as exc:
                raise self.error(element, field_, str(exc)) from None
            values.append(_exact_angle(value) if angles else value)
        return tuple(values)

    def number(self, element: _Element, attribute: str, field_: str, default=None) -> sp.Expr:
        return self.numbers(element, attribute, 1, field_, None if default is None else (default,))[0]

    def optional_float(self, element: _Element, attribute: str, field_: str) -> float | None:
        if attribute not in element.attrib:
            return None
        return float(self.number(element, attribute, field_))

    def single(self, parent: _Element, tag: str, field_: str, required: bool = False) -> _Element | None:
        found = parent.find_all(tag)
        if len(found) > 1:
            raise self.error(found[1], f"{field_}.{tag}", f"more than one <{tag}> element "
                             f"(the first is at line {found[0].line})")
        if not found:
            if required:
                raise self.error(parent, field_, f"missing <{tag}> element")
            return None
        return found[0]

    def name(self, element: _Element, field_: str, what: str) -> str:
        name = element.attrib.get("name")
        if name is None:
            raise self.error(element, field_, f"missing attribute 'name' of the {what}")
        if not _NAME.match(name):
            raise self.error(element, field_, f"{what} name {name!r} must consist of letters, digits and "
                             "'_', '.', ':', '/', '-' or spaces, starting with a letter, digit or '_'")
        return name

    def origin(self, parent: _Element, field_: str) -> sp.Matrix:
        """The <origin xyz rpy> child as a homogeneous transform (identity when absent)."""
        element = self.single(parent, "origin", field_)
        if element is None:
            return sp.eye(4)
        xyz = self.numbers(element, "xyz", 3, f"{field_}.origin.xyz", default=(0, 0, 0))
        rpy = self.numbers(element, "rpy", 3, f"{field_}.origin.rpy", default=(0, 0, 0), angles=True)
        return geometry.homogeneous(geometry.rpy(*rpy), list(xyz)).applyfunc(_bake)


def _bake(expr: sp.Expr) -> sp.Expr:
    """Keep a constant exact while it is algebraic (rationals, square roots from quarter turns and
    axis normalisation); sines and cosines of other angles, and anything already mixed with a Float,
    become one 30-digit Float: exact products of them grow without bound when transforms and
    inertias are composed, and the C code would only round them to doubles anyway."""
    expr = sp.expand(expr)
    if expr.has(sp.Float) or expr.has(sp.sin, sp.cos, sp.tan):
        return expr.evalf(DIGITS)
    return expr


def _exact_angle(value: sp.Rational) -> sp.Expr:
    """k pi / d for d in 1, 2, 3, 4, 6, 12 when ``value`` is that angle as a double (within 4 ulps)."""
    v = float(value)
    if v == 0.0:
        return value
    for d in (1, 2, 3, 4, 6, 12):
        k = round(v * d / math.pi)
        if k != 0 and abs(v - k * math.pi / d) <= 4 * math.ulp(v):
            return sp.pi * sp.Rational(k, d)
    return value


def _lock_value(value, angle: bool) -> sp.Expr:
    """A lock position as an exact number: ValueError (or ExpressionError) unless it is a finite real
    number of a literal's range (magnitudes from 1e-100 to 1e100, or 0)."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number")
    if isinstance(value, sp.Basic) and (not value.is_number or not value.is_real):
        raise ValueError(f"{str(value)[:40]} is not a real number")
    try:
        number = float(value)
    except OverflowError:
        raise ValueError("the value is out of range (magnitudes from 1e-100 to 1e100)") from None
    if not math.isfinite(number):
        raise ValueError(f"{number!r} is not finite" if isinstance(value, (int, float, sp.Basic)) else
                         f"{str(value)[:40]!r} is not finite")
    if number == 0.0 and (not isinstance(value, sp.Basic) or value.is_zero):
        return sp.Integer(0)
    exact = parse_number_literal(repr(number))  # checks the range
    if isinstance(value, sp.Basic):
        return value
    return _exact_angle(exact) if angle else exact


# --- links ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Body:
    """Mass properties of a rigid part, all in one frame: com in it, inertia about the com in its axes."""

    mass: sp.Expr
    com: sp.Matrix
    inertia: sp.Matrix


_ZERO_BODY = _Body(sp.Integer(0), sp.zeros(3, 1), sp.zeros(3, 3))


@dataclass
class _Link:
    name: str
    element: _Element
    body: _Body | None  # None: no <inertial> (massless)
    check: tuple[_Element, str, sp.Matrix] | None = None  # the tensor as written, checked if the link moves
    parent_joint: "_UJoint | None" = None
    child_joints: list["_UJoint"] = field(default_factory=list)


@dataclass
class _UJoint:
    name: str
    element: _Element
    kind: str
    parent: str
    child: str
    parent_element: _Element
    child_element: _Element
    origin: sp.Matrix
    axis: sp.ImmutableMatrix | None
    limits: Limits
    viscous: sp.Expr
    coulomb: sp.Expr
    mimic: _Element | None


def _parse_link(reader: _Reader, element: _Element) -> _Link:
    name = reader.name(element, "link", "link")
    field_ = f"link[{name}]"
    inertial = reader.single(element, "inertial", field_)
    if inertial is None:
        return _Link(name, element, None)
    field_ = f"{field_}.inertial"
    origin = reader.origin(inertial, field_)
    mass_element = reader.single(inertial, "mass", field_, required=True)
    mass = reader.number(mass_element, "value", f"{field_}.mass")
    if mass < 0:
        raise reader.error(mass_element, f"{field_}.mass", f"mass must not be negative (got {float(mass):g})")
    inertia_element = reader.single(inertial, "inertia", field_, required=True)
    keys = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
    values = {key: reader.number(inertia_element, key, f"{field_}.inertia.{key}") for key in keys}
    inertia = sp.Matrix([[values["ixx"], values["ixy"], values["ixz"]],
                         [values["ixy"], values["iyy"], values["iyz"]],
                         [values["ixz"], values["iyz"], values["izz"]]])
    check = (inertia_element, f"{field_}.inertia", inertia)
    rotation = origin[:3, :3]
    if rotation != sp.eye(3):
        inertia = (rotation * inertia * rotation.T).applyfunc(_bake)
    return _Link(name, element, _Body(mass, origin[:3, 3], inertia), check=check)


def _check_inertia(reader: _Reader, element: _Element, field_: str, inertia: sp.Matrix) -> None:
    """Positive semi-definite (relative tolerance 1e-9) and the triangle inequality (relative 1e-6).

    Both tolerances are relative to the largest principal moment (plus 1e-18 kg m^2, for tensors
    that are zero but for rounding noise); the triangle tolerance is loose because real URDFs print
    their tensors rounded, which often breaks the inequality slightly."""
    values = np.array(inertia.evalf(30).tolist(), dtype=float)
    eigenvalues = np.linalg.eigvalsh(values)
    scale = float(np.abs(eigenvalues).max())
    if eigenvalues[0] < -(PSD_TOLERANCE * scale + ABSOLUTE_TOLERANCE):
        raise reader.error(element, field_, "inertia tensor is not positive semi-definite "
                           f"(principal moments {', '.join(f'{e:g}' for e in eigenvalues)})")
    a, b, c = eigenvalues
    if a + b < c - (TRIANGLE_TOLERANCE * scale + ABSOLUTE_TOLERANCE):
        raise reader.error(element, field_, "inertia tensor violates the triangle inequality: principal "
                           f"moments {a:g}, {b:g}, {c:g} cannot belong to a real body (each must be <= the "
                           f"sum of the other two, within {TRIANGLE_TOLERANCE:g} of the largest)")


# --- joints ---------------------------------------------------------------------------------------

def _parse_joint(reader: _Reader, element: _Element, locked: bool) -> _UJoint:
    name = reader.name(element, "joint", "joint")
    field_ = f"joint[{name}]"
    kind = element.attrib.get("type")
    if kind is None:
        raise reader.error(element, f"{field_}.type", "missing attribute 'type'")
    if kind not in MOVING_TYPES and kind != "fixed":
        if kind in REJECTED_TYPES:
            detail = "only revolute, continuous, prismatic and fixed joints are supported"
        else:
            detail = "expected one of revolute, continuous, prismatic, fixed"
        raise reader.error(element, f"{field_}.type", f"unsupported joint type {kind!r} for joint {name!r}; {detail}")

    links = {}
    for tag in ("parent", "child"):
        link_element = reader.single(element, tag, field_, required=True)
        link = link_element.attrib.get("link")
        if link is None:
            raise reader.error(link_element, f"{field_}.{tag}", "missing attribute 'link'")
        links[tag] = (link, link_element)

    origin = reader.origin(element, field_)
    axis = None
    limits = Limits(None, None, None, None)
    viscous = coulomb = sp.Integer(0)
    mimic = reader.single(element, "mimic", field_)
    if kind in MOVING_TYPES:
        if mimic is not None and not locked:
            raise reader.error(mimic, f"{field_}.mimic", f"mimic joints are not supported (joint {name!r} "
                               f"mimics {mimic.attrib.get('joint', '?')!r}); lock it, e.g. lock={{{name!r}: 0.0}}")
        axis_element = reader.single(element, "axis", field_)
        if axis_element is None:
            components = (sp.Integer(1), sp.Integer(0), sp.Integer(0))  # the URDF default
        else:
            components = reader.numbers(axis_element, "xyz", 3, f"{field_}.axis", default=(1, 0, 0))
        norm_squared = sum(c**2 for c in components)
        if norm_squared == 0:
            raise reader.error(axis_element, f"{field_}.axis", "axis must not be the zero vector")
        norm = sp.sqrt(norm_squared)
        axis = sp.ImmutableMatrix([sp.radsimp(c / norm) for c in components])

        limit_element = reader.single(element, "limit", field_)
        if limit_element is not None:
            lf = f"{field_}.limit"
            values = [reader.optional_float(limit_element, key, f"{lf}.{key}")
                      for key in ("lower", "upper", "velocity", "effort")]
            if kind == "continuous":
                values[0] = values[1] = None
            lower, upper, velocity, effort = values
            if lower is not None and upper is not None and lower > upper:
                raise reader.error(limit_element, lf, f"lower limit {lower:g} is above upper limit {upper:g}")
            for key, value in (("velocity", velocity), ("effort", effort)):
                if value is not None and value < 0:
                    raise reader.error(limit_element, f"{lf}.{key}", f"{key} limit must not be negative")
            limits = Limits(lower, upper, velocity, effort)

        dynamics = reader.single(element, "dynamics", field_)
        if dynamics is not None:
            df = f"{field_}.dynamics"
            viscous = reader.number(dynamics, "damping", f"{df}.damping", default=0)
            coulomb = reader.number(dynamics, "friction", f"{df}.friction", default=0)
            for key, value in (("damping", viscous), ("friction", coulomb)):
                if value < 0:
                    raise reader.error(dynamics, f"{df}.{key}", f"{key} must not be negative")
    return _UJoint(name, element, kind, links["parent"][0], links["child"][0], links["parent"][1],
                   links["child"][1], origin, axis, limits, viscous, coulomb, mimic)


# --- the tree -------------------------------------------------------------------------------------

def _build_tree(reader: _Reader, robot: _Element, links: dict[str, _Link], joints: list[_UJoint]) -> _Link:
    for joint in joints:
        field_ = f"joint[{joint.name}]"
        for tag, name, element in (("parent", joint.parent, joint.parent_element),
                                   ("child", joint.child, joint.child_element)):
            if name not in links:
                raise reader.error(element, f"{field_}.{tag}", f"{tag} link {name!r} of joint {joint.name!r} "
                                   "is not defined (no <link name=...> with that name)")
        if joint.parent == joint.child:
            raise reader.error(joint.child_element, f"{field_}.child",
                               f"joint {joint.name!r} connects link {joint.child!r} to itself")
        child = links[joint.child]
        if child.parent_joint is not None:
            raise reader.error(joint.child_element, f"{field_}.child", f"link {joint.child!r} is the child of "
                               f"both joint {child.parent_joint.name!r} (line {child.parent_joint.element.line}) "
                               f"and joint {joint.name!r}: a URDF must be a tree")
        child.parent_joint = joint
        links[joint.parent].child_joints.append(joint)

    # Each link has at most one parent now: a loop shows up when walking up from a link.
    cleared: set[str] = set()
    for link in links.values():
        seen: list[_UJoint] = []
        current = link
        while current.parent_joint is not None and current.name not in cleared:
            if current.parent_joint in seen:
                loop = seen[seen.index(current.parent_joint):]
                last = max(loop, key=lambda j: j.element.line)
                names = " -> ".join(j.name for j in sorted(loop, key=lambda j: j.element.line))
                raise reader.error(last.element, f"joint[{last.name}]",
                                   f"joints {names} form a cycle: a URDF must be a tree")
            seen.append(current.parent_joint)
            current = links[current.parent_joint.parent]
        cleared.update(links[j.child].name for j in seen)

    roots = [link for link in links.values() if link.parent_joint is None]
    if len(roots) > 1:
        def size(link: _Link) -> int:
            count, stack = 0, [link]
            while stack:
                count += 1
                stack.extend(links[j.child] for j in stack.pop().child_joints)
            return count

        # The smallest tree is most likely the one that was meant to be attached.
        stray = min(reversed(roots), key=size)
        listing = ", ".join(f"{r.name!r} (line {r.element.line})" for r in roots)
        raise reader.error(stray.element, f"link[{stray.name}]", f"several root links: {listing}; every link but "
                           "one must be the child of a joint (a URDF must be a single tree)")
    return roots[0]


def _transform_body(body: _Body, transform: sp.Matrix) -> _Body:
    """Mass properties of ``body`` (given in a link frame) in the frame where that link sits at ``transform``."""
    rotation, translation = transform[:3, :3], transform[:3, 3]
    if transform == sp.eye(4):
        return body
    com = (rotation * body.com + translation).applyfunc(_bake)
    inertia = body.inertia if rotation == sp.eye(3) else (rotation * body.inertia * rotation.T).applyfunc(_bake)
    return _Body(body.mass, com, inertia)


def _combine(bodies: list[_Body]) -> _Body:
    """One body from several in the same frame: mass sum, mass-weighted centre, parallel-axis theorem."""
    bodies = [b for b in bodies if b.mass != 0 or b.inertia != sp.zeros(3, 3)]
    if not bodies:
        return _ZERO_BODY
    if len(bodies) == 1:
        return bodies[0]
    mass = sum((b.mass for b in bodies), sp.Integer(0))
    if mass == 0:
        return _Body(mass, sp.zeros(3, 1), sum((b.inertia for b in bodies), sp.zeros(3, 3)))
    com = (sum((b.mass * b.com for b in bodies), sp.zeros(3, 1)) / mass).applyfunc(_bake)
    inertia = sp.zeros(3, 3)
    for b in bodies:
        d = b.com - com
        inertia += b.inertia + b.mass * ((d.T * d)[0, 0] * sp.eye(3) - d * d.T)
    return _Body(mass, com, inertia.applyfunc(_bake))


# --- entry points ---------------------------------------------------------------------------------

def _robot_name(raw: str, path: str) -> str:
    for candidate in (raw, Path(path).stem, "robot"):
        name = re.sub(r"[^a-z0-9_]+", "_", candidate.lower()).strip("_")
        if not name:
            continue
        if not name[0].isalpha():
            name = "r_" + name
        name = name[:40].rstrip("_")
        if _ROBOT_NAME.match(name):
            return name
    return "robot"


def parse_urdf_text(text: str | bytes, path: str = "<string>", data: bytes | None = None,
                    lock: Mapping[str, float] | None = None,
                    runtime_parameters: bool = False, tool: str | None = None,
                    accept_invalid_inertia: bool = False) -> RobotDescription:
    """Parse URDF text (or bytes, whose XML declaration then gives the encoding).

    ``lock`` maps names of moving joints to positions (rad or m): each becomes a fixed joint at that
    position and is merged like one. ``path`` is used in messages and for the summary.
    By default inertial values are numbers baked into the generated code (zeros vanish, fewer
    operations); ``runtime_parameters`` makes each moving body's mass, centre of mass and
    inertia, and each nonzero friction coefficient, a named parameter settable at run time.
    ``tool`` names the link whose frame is the tool frame (default: the last moving joint's link);
    a link merged into its parent by a fixed joint keeps its own frame.
    """
    reader = _Reader(path)
    robot = _parse_xml(text, path)
    if robot.tag != "robot":
        hint = " (this looks like xacro: expand it first with xacro)" if robot.tag.startswith("xacro:") else ""
        raise reader.error(robot, "", f"the root element must be <robot>, not <{robot.tag}>{hint}")
    xacro = _find_xacro(robot)
    if xacro is not None:
        raise reader.error(xacro, "", f"<{xacro.tag}> is a xacro macro element: expand the file first with xacro")
    # A nameless robot (urdfdom would refuse it) is named after its file, as YAML descriptions are.
    name = _robot_name(robot.attrib.get("name", ""), path)

    links: dict[str, _Link] = {}
    for element in robot.find_all("link"):
        link = _parse_link(reader, element)
        if link.name in links:
            raise reader.error(element, f"link[{link.name}]", f"duplicate link name {link.name!r} "
                               f"(first defined at line {links[link.name].element.line})")
        links[link.name] = link
    if not links:
        raise reader.error(robot, "robot", "the URDF has no <link>")

    lock = dict(lock or {})
    joints: list[_UJoint] = []
    first_line: dict[str, int] = {}
    for element in robot.find_all("joint"):
        joint = _parse_joint(reader, element, element.attrib.get("name") in lock)
        if joint.name in first_line:
            raise reader.error(element, f"joint[{joint.name}]", f"duplicate joint name {joint.name!r} "
                               f"(first defined at line {first_line[joint.name]})")
        first_line[joint.name] = element.line
        joints.append(joint)

    locked: dict[str, sp.Expr] = {}
    by_name = {j.name: j for j in joints}
    for joint_name, value in lock.items():
        joint = by_name.get(joint_name)
        if joint is None:
            raise reader.error(None, f"lock[{joint_name}]", f"no joint named {joint_name!r} in the URDF")
        if joint.kind not in MOVING_TYPES:
            raise reader.error(joint.element, f"lock[{joint_name}]",
                               f"joint {joint_name!r} is {joint.kind}; only moving joints can be locked")
        try:
            position = _lock_value(value, angle=joint.kind != "prismatic")
        except (ValueError, TypeError, ExpressionError) as exc:
            raise reader.error(joint.element, f"lock[{joint_name}]", f"invalid position: {exc}") from None
        low, high = joint.limits.lower, joint.limits.upper
        numeric = float(position)
        below = low is not None and numeric < low - LIMIT_TOLERANCE
        above = high is not None and numeric > high + LIMIT_TOLERANCE
        if below or above:
            bounds = f"[{'-inf' if low is None else f'{low:g}'}, {'inf' if high is None else f'{high:g}'}]"
            raise reader.error(joint.element, f"lock[{joint_name}]",
                               f"position {numeric:g} is outside the joint's limits {bounds}")
        locked[joint_name] = position

    root = _build_tree(reader, robot, links, joints)
    frames: dict[str, tuple[int, sp.Matrix]] = {}
    model_joints = _flatten(reader, root, links, locked, frames)
    if not model_joints:
        raise reader.error(robot, "robot", "the URDF has no moving joint (revolute, continuous or prismatic) "
                           "left to model" + (" after locking" if locked else ""))

    parameters: tuple[Parameter, ...] = ()
    if runtime_parameters:
        model_joints, parameters = _parameterise(model_joints)

    tool_link, tool_frame = -1, sp.eye(4)
    if tool is not None:
        if tool not in frames:
            raise reader.error(None, "tool", f"no link named {tool!r} in the URDF (links: {_preview(list(frames))})")
        tool_link, tool_frame = frames[tool]
        if tool_link < 0:
            raise reader.error(links[tool].element, "tool", f"link {tool!r} is fixed to the base: it cannot carry "
                               "a tool that moves")

    digest_source = data if data is not None else (text if isinstance(text, bytes) else text.encode())
    summary = f"from URDF {Path(path).name}"
    if locked:
        summary += "; locked " + ", ".join(f"{k}={float(v):g}" for k, v in locked.items())
    return RobotDescription(name=name, path=path, source_sha256=hashlib.sha256(digest_source).hexdigest(),
                            summary=summary, parameters=parameters, gravity=GRAVITY, base=sp.ImmutableMatrix(sp.eye(4)),
                            joints=tuple(model_joints), tool=sp.ImmutableMatrix(tool_frame), tool_link=tool_link)


def _preview(names: list[str], limit: int = 12) -> str:
    return ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")


def _parameterise(joints: list[Joint]) -> tuple[list[Joint], tuple[Parameter, ...]]:
    """Replace baked inertial and friction values by named parameters (defaults: the values)."""
    parameters: list[Parameter] = []
    taken: set[str] = set()

    def parameter(stem: str, suffix: str, value) -> sp.Symbol:
        base = re.sub(r"[^A-Za-z0-9_]", "_", stem)
        if not base or not base[0].isalpha():
            base = "p_" + base
        name, count = f"{base}_{suffix}", 1
        while name in taken:
            count += 1
            name = f"{base}{count}_{suffix}"
        taken.add(name)
        symbol = sp.Symbol(name, real=True)
        parameters.append(Parameter(name, float(value), symbol))
        return symbol

    result = []
    for joint in joints:
        body = joint.inertial
        stem = joint.link_name
        mass = parameter(stem, "m", body.mass)
        com = sp.ImmutableMatrix([parameter(stem, f"c{axis}", body.com[k]) for k, axis in enumerate("xyz")])
        inertia = sp.zeros(3, 3)
        for (i, j), suffix in zip(((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2)),
                                  ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")):
            inertia[i, j] = inertia[j, i] = parameter(stem, suffix, body.inertia[i, j])
        viscous = parameter(joint.name, "fv", joint.viscous) if joint.viscous != 0 else joint.viscous
        coulomb = parameter(joint.name, "fs", joint.coulomb) if joint.coulomb != 0 else joint.coulomb
        result.append(dataclasses.replace(joint, inertial=Inertial(mass, com, sp.ImmutableMatrix(inertia), False),
                                          viscous=viscous, coulomb=coulomb))
    return result, tuple(parameters)


def _find_xacro(element: _Element) -> _Element | None:
    stack = [element]
    while stack:
        current = stack.pop()
        if current.tag.startswith("xacro:"):
            return current
        stack.extend(reversed(current.children))
    return None


def _flatten(reader: _Reader, root: _Link, links: dict[str, _Link], locked: Mapping[str, sp.Expr],
             frames: dict[str, tuple[int, sp.Matrix]] | None = None) -> list[Joint]:
    """Model joints depth-first from the root, with fixed (and locked) joints merged away.

    ``frames`` (if given) receives, for every link, the model joint whose body carries it
    (-1: the base) and the link's pose in that body's frame."""
    pending: list[dict] = []  # per model joint: its fields, and the parts of its body
    carried_by: dict[str, int] = {}  # link name -> model joint index (-1: base)

    # Depth-first, children in document order, with an explicit stack (chains may be long). Each
    # item: a link, the model joint whose body carries it (-1: the base) and the link's pose in that
    # body's frame (the child link frame of that model joint). A link behind a moving joint comes
    # with that joint's entry instead, numbered when taken off the stack: parents come first.
    stack: list[tuple[_Link, int | None, sp.Matrix, dict | None]] = [(root, -1, sp.eye(4), None)]
    while stack:
        link, body, frame, entry = stack.pop()
        if entry is not None:
            body = len(pending)
            pending.append(entry)
        carried_by[link.name] = body
        if frames is not None:
            frames[link.name] = (body, frame)
        if body >= 0 and link.body is not None:
            pending[body]["parts"].append(_transform_body(link.body, frame))
        children = []
        for joint in link.child_joints:
            child = links[joint.child]
            placement = (frame * joint.origin).applyfunc(_bake) if frame != sp.eye(4) else joint.origin
            if joint.kind == "fixed" or joint.name in locked:
                if joint.name in locked:
                    kind = "prismatic" if joint.kind == "prismatic" else "revolute"
                    motion = geometry.screw(kind, sp.Matrix(joint.axis), locked[joint.name]).applyfunc(_bake)
                    placement = (placement * motion).applyfunc(_bake)
                children.append((child, body, placement, None))
            else:
                children.append((child, None, sp.eye(4), {"joint": joint, "parent": body, "placement": placement,
                                                          "parts": []}))
        stack.extend(reversed(children))

    # Only what moves enters the model: links rigidly attached to the (fixed) base are dropped,
    # so their tensors are not checked (many URDFs give dummy base links placeholder inertias).
    for link in links.values():
        if link.check is not None and carried_by.get(link.name, -1) >= 0:
            _check_inertia(reader, *link.check)

    bodies = [_combine(entry["parts"]) for entry in pending]
    # A joint whose whole subtree is massless makes M singular.
    subtree_mass = [b.mass for b in bodies]
    subtree_inertia = [b.inertia != sp.zeros(3, 3) for b in bodies]
    for index in reversed(range(len(pending))):
        parent = pending[index]["parent"]
        if parent >= 0:
            subtree_mass[parent] += subtree_mass[index]
            subtree_inertia[parent] = subtree_inertia[parent] or subtree_inertia[index]
    for index, entry in enumerate(pending):
        joint = entry["joint"]
        singular = subtree_mass[index] == 0 and (joint.kind == "prismatic" or not subtree_inertia[index])
        if singular:
            link = links[joint.child]
            raise reader.error(link.element, f"link[{link.name}]", f"link {link.name!r} carried by joint "
                               f"{joint.name!r} has no mass and nothing massive beyond it: M would be singular")

    result = []
    for entry, body in zip(pending, bodies):
        joint: _UJoint = entry["joint"]
        kind = "prismatic" if joint.kind == "prismatic" else "revolute"
        result.append(Joint(
            name=joint.name, kind=kind, parent=entry["parent"], placement=sp.ImmutableMatrix(entry["placement"]),
            axis=joint.axis, successor=sp.ImmutableMatrix(sp.eye(4)), link_name=joint.child,
            inertial=Inertial(body.mass, sp.ImmutableMatrix(body.com), sp.ImmutableMatrix(body.inertia), False),
            viscous=joint.viscous, coulomb=joint.coulomb, rotor=None, limits=joint.limits, line=joint.element.line))
    return result


def parse_urdf_file(path: str | Path, lock: Mapping[str, float] | None = None) -> RobotDescription:
    path_text = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise DescriptionError(path_text, None, "", f"cannot read the URDF: {exc.strerror}") from None
    return parse_urdf_text(data, path_text, data, lock)

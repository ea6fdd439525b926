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
* ``mimic`` joints (q = multiplier * q_source + offset) stay in the kinematic
  tree (``RobotDescription.bodies``) but are not coordinates of the model: a
  mimic of a mimic is resolved to the joint at the end of the chain; a mimic
  whose chain ends at a locked joint (or whose multiplier is 0) is locked at the
  position the coupling gives; a locked mimic joint locks the joint its chain
  ends at where the coupling puts it (a lock already there must agree), so the
  two stay coupled; a mimic of a missing or fixed joint, and a cycle of mimics,
  are errors. A mimic joint's
  limits play no part in the model; its ``<dynamics>`` friction acts at its own
  velocity and is projected on its source's coordinate;
* ``floating`` and ``planar`` joints and unknown types are rejected;
* the root link is the fixed base (``base`` is the identity: the world frame is
  the root link's frame); whatever is rigidly attached to it does not move and
  is dropped, unchecked. A root that looks like a mobile base (see
  ``_mobile_base_signs``) gets a DescriptionWarning saying so: floating bases
  are not modelled;
* a link without ``<inertial>`` is massless; a coordinate with nothing massive
  beyond any of its joints is rejected (M would be singular); the mass and
  inertia tensor of every link that moves must be physically possible within
  the tolerances of ``physical.check_mass_properties`` (they scale with the
  tensor and its mass: rounded printing and exporter noise pass); an
  impossible tensor is an error, or with ``accept_invalid_inertia`` a
  DescriptionWarning;
* a ``<limit>`` whose lower and upper are equal (exporters' placeholder
  ``0 0``) gives no position limits, and a velocity or effort limit of 0 none;
* every problem of the file is reported in one DescriptionError (up to 20),
  each with its line and field;
* numbers are baked as exact SymPy numbers: every decimal in the XML becomes
  the Rational it spells (``0.1`` -> 1/10); an angle that is a double within
  4 ulps of a multiple of pi/12 (such as ``1.5707963267948966``) becomes that
  exact multiple of pi, so that its sine and cosine are exact; with
  ``exact_angles`` (``--exact-angles``), an angle within 1e-9 rad of a multiple
  of pi/2 (such as the UR5's ``1.57079632679``) becomes that multiple as well
  (every angle: origin and inertial rpy, lock positions, mimic offsets);
* gravity is ``[0, 0, -9.81]``, settable at run time through the parameters
  ``gravity_x``, ``gravity_y``, ``gravity_z``; the tool is the identity on the
  link of the last joint.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping
from xml.parsers import expat

import numpy as np
import sympy as sp

from .. import geometry
from ..model import names as model_names
from ..errors import DescriptionError, DescriptionErrors, DescriptionWarning
from .expressions import MAX_QUANTITY, ExpressionError, parse_number_literal
from .model import FloatingBase, Frame, Inertial, Joint, Limits, Mimic, Parameter, RobotDescription, coordinate_parents
from .physical import check_mass_properties, describe_violations

MOVING_TYPES = ("revolute", "continuous", "prismatic")
REJECTED_TYPES = ("floating", "planar")
# A URDF name ends up in C comments and JSON metadata: keep it printable and comment-safe.
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/\- ]*$")
_DECIMAL = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
_ROBOT_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")

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
    def __init__(self, path: str, exact_angles: bool = False):
        self.path = path
        self.exact_angles = exact_angles

    def angle(self, value: sp.Expr) -> sp.Expr:
        """An angle, exact where it can be: ``_exact_angle`` (4 ulps of k pi / 12) and, with
        ``exact_angles``, first ``geometry.nearest_quarter_turn`` (1e-9 rad of k pi / 2)."""
        if self.exact_angles:
            nearest = geometry.nearest_quarter_turn(value)
            if nearest is not None:
                return nearest
        return _exact_angle(value) if value.is_Rational else value

    def error(self, element: _Element | None, field_: str, message: str) -> DescriptionError:
        return DescriptionError(self.path, None if element is None else element.line, field_, message)

    def numbers(self, element: _Element, attribute: str, count: int, field_: str,
                default: tuple | None = None, angles: bool = False, bounded: bool = True) -> tuple[sp.Expr, ...]:
        """``bounded``: quantities of the model, of magnitude at most MAX_QUANTITY (not a joint limit: exporters
        write 1e16 or 3.4e38 for "none")."""
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
            if bounded and abs(value) > MAX_QUANTITY:
                raise self.error(element, field_, f"{float(value):.3g} (in {attribute}=\"{text}\") is beyond "
                                 f"{MAX_QUANTITY:g}: no robot needs it in any units, and the model's products of such "
                                 "values overflow double precision")
            values.append(self.angle(value) if angles else value)
        return tuple(values)

    def number(self, element: _Element, attribute: str, field_: str, default=None, bounded: bool = True) -> sp.Expr:
        return self.numbers(element, attribute, 1, field_, None if default is None else (default,),
                            bounded=bounded)[0]

    def optional_float(self, element: _Element, attribute: str, field_: str) -> float | None:
        """A joint limit's number, if given (not bounded: see ``numbers``)."""
        if attribute not in element.attrib:
            return None
        return float(self.number(element, attribute, field_, bounded=False))

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


def _lock_value(value, angle: bool, reader: _Reader) -> sp.Expr:
    """A lock position as an exact number (an angle made exact by ``reader.angle`` when ``angle``):
    ValueError (or ExpressionError) unless it is a finite real number of a literal's range (magnitudes
    from 1e-100 to 1e100, or 0)."""
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
    return reader.angle(exact) if angle else exact


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
    check: tuple[_Element, str, sp.Matrix, sp.Expr] | None = None  # tensor as written, mass: checked if it moves
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
    mimic: "_UMimic | None"


@dataclass(frozen=True)
class _UMimic:
    """A joint's <mimic>: q = multiplier * q[joint] + offset."""

    element: _Element
    joint: str
    multiplier: sp.Expr
    offset: sp.Expr


def _parse_link(reader: _Reader, element: _Element) -> _Link:
    name = reader.name(element, "link", "link")
    field_ = f"link[{name}]"
    inertial = reader.single(element, "inertial", field_)
    if inertial is None:
        return _Link(name, element, None)
    field_ = f"{field_}.inertial"
    origin = reader.origin(inertial, field_)
    mass_element = reader.single(inertial, "mass", field_, required=True)
    # Mass and inertia are bounded (MAX_QUANTITY) with the tensor's other checks, for links that move only: links
    # fixed to the base are dropped, and exporters give them placeholder values.
    mass = reader.number(mass_element, "value", f"{field_}.mass", bounded=False)
    if mass < 0:
        raise reader.error(mass_element, f"{field_}.mass", f"mass must not be negative (got {float(mass):g})")
    inertia_element = reader.single(inertial, "inertia", field_, required=True)
    keys = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
    values = {key: reader.number(inertia_element, key, f"{field_}.inertia.{key}", bounded=False) for key in keys}
    inertia = sp.Matrix([[values["ixx"], values["ixy"], values["ixz"]],
                         [values["ixy"], values["iyy"], values["iyz"]],
                         [values["ixz"], values["iyz"], values["izz"]]])
    check = (inertia_element, f"{field_}.inertia", inertia, mass, mass_element)
    rotation = origin[:3, :3]
    if rotation != sp.eye(3):
        inertia = (rotation * inertia * rotation.T).applyfunc(_bake)
    return _Link(name, element, _Body(mass, origin[:3, 3], inertia), check=check)


def _check_inertia(reader: _Reader, element: _Element, field_: str, inertia: sp.Matrix, mass: sp.Expr,
                   mass_element: _Element, accept: bool) -> None:
    """The link's mass and tensor must be within MAX_QUANTITY, and the tensor physically possible
    (``physical.check_mass_properties``); with ``accept`` an impossible one gives a DescriptionWarning instead of the
    error."""
    for where, name, value in ((mass_element, field_.rsplit(".", 1)[0] + ".mass", mass),
                               *((element, field_, entry) for entry in inertia)):
        if abs(value) > MAX_QUANTITY:
            raise reader.error(where, name, f"{float(value):.3g} is beyond {MAX_QUANTITY:g}: no robot needs it in "
                               "any units, and the model's products of such values overflow double precision")
    values = np.array(inertia.evalf(30).tolist(), dtype=float)
    violations = check_mass_properties(float(mass), values)
    if not violations:
        return
    link = field_.split("]")[0] + "]"
    message = f"{link}: {describe_violations(violations)}"
    if not accept:
        raise reader.error(element, field_, message + " (--accept-invalid-inertia accepts it with a warning)")
    warnings.warn(DescriptionWarning(reader.path, element.line, field_, message + "; accepted "
                                     "(accept_invalid_inertia): the model may not be physical"), stacklevel=3)


# --- joints ---------------------------------------------------------------------------------------

def _parse_joint(reader: _Reader, element: _Element) -> _UJoint:
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
    mimic = None
    mimic_element = reader.single(element, "mimic", field_)
    if kind in MOVING_TYPES:
        if mimic_element is not None:
            mf = f"{field_}.mimic"
            source = mimic_element.attrib.get("joint")
            if source is None:
                raise reader.error(mimic_element, mf, "missing attribute 'joint' (the joint this one mimics)")
            mimic = _UMimic(mimic_element, source, reader.number(mimic_element, "multiplier", f"{mf}.multiplier", 1),
                            reader.number(mimic_element, "offset", f"{mf}.offset", 0))
        axis_element = reader.single(element, "axis", field_)
        if axis_element is None:
            components = (sp.Integer(1), sp.Integer(0), sp.Integer(0))  # the URDF default
        else:
            components = reader.numbers(axis_element, "xyz", 3, f"{field_}.axis", default=(1, 0, 0),
                                        bounded=False)  # a direction: any length
        norm_squared = sum(c**2 for c in components)
        if norm_squared == 0:
            raise reader.error(axis_element, f"{field_}.axis", "axis must not be the zero vector")
        axis = sp.ImmutableMatrix([sp.radsimp(c) for c in geometry.unit_vector(list(components), norm_squared)])

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
            if lower is not None and lower == upper:
                # A joint that may not move at all is an exporter's placeholder (lower = upper = 0).
                lower = upper = None
            # Likewise a zero velocity or effort limit (double_pendulum.urdf writes all four as 0).
            velocity = velocity or None
            effort = effort or None
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
        if model_names.clashes_with_runtime(name):  # its C symbols would be the runtime's (codegen.model.names)
            name = ("robot_" + name)[:40].rstrip("_")
        if _ROBOT_NAME.match(name):
            return name
    return "robot"


def parse_urdf_text(text: str | bytes, path: str = "<string>", data: bytes | None = None,
                    lock: Mapping[str, float] | None = None,
                    runtime_parameters: bool = False, tool: str | None = None,
                    accept_invalid_inertia: bool = False, floating: bool = False,
                    exact_angles: bool = False) -> RobotDescription:
    """Parse URDF text (or bytes, whose XML declaration then gives the encoding).

    ``lock`` maps names of moving joints to positions (rad or m): each becomes a fixed joint at that
    position and is merged like one. ``path`` is used in messages and for the summary.
    By default inertial values are numbers baked into the generated code (zeros vanish, fewer
    operations); ``runtime_parameters`` makes each moving body's mass, centre of mass and
    inertia, and each nonzero friction coefficient, a named parameter settable at run time.
    ``tool`` names the link whose frame is the tool frame (default: the last moving joint's link);
    a link merged into its parent by a fixed joint keeps its own frame.
    ``floating``: the root link moves freely (a free flyer, docs/floating_base.md), carrying the links
    fixed to it; by default it is fixed to the world, as the URDF convention has it.
    ``exact_angles``: every angle within 1e-9 rad of a multiple of pi/2 is taken as that multiple
    (``geometry.nearest_quarter_turn``); by default only doubles within 4 ulps of a multiple of pi/12 are.
    """
    reader = _Reader(path, exact_angles)
    robot = _parse_xml(text, path)
    if robot.tag != "robot":
        hint = " (this looks like xacro: expand it first with xacro)" if robot.tag.startswith("xacro:") else ""
        raise reader.error(robot, "", f"the root element must be <robot>, not <{robot.tag}>{hint}")
    xacro = _find_xacro(robot)
    if xacro is not None:
        raise reader.error(xacro, "", f"<{xacro.tag}> is a xacro macro element: expand the file first with xacro")
    # A nameless robot (urdfdom would refuse it) is named after its file, as YAML descriptions are.
    name = _robot_name(robot.attrib.get("name", ""), path)
    problems = DescriptionErrors()  # every problem of the file, reported together

    links: dict[str, _Link] = {}
    for element in robot.find_all("link"):
        with problems.section():
            link = _parse_link(reader, element)
            if link.name in links:
                raise reader.error(element, f"link[{link.name}]", f"duplicate link name {link.name!r} "
                                   f"(first defined at line {links[link.name].element.line})")
            links[link.name] = link
    if not links and not problems:
        raise reader.error(robot, "robot", "the URDF has no <link>")

    joints: list[_UJoint] = []
    first_line: dict[str, int] = {}
    broken: set[str] = set()  # joints with a problem reported: a mimic of one is not reported again
    for element in robot.find_all("joint"):
        with problems.section():
            try:
                joint = _parse_joint(reader, element)
            except DescriptionError:
                broken.add(element.attrib.get("name", ""))
                raise
            if joint.name in first_line:
                raise reader.error(element, f"joint[{joint.name}]", f"duplicate joint name {joint.name!r} "
                                   f"(first defined at line {first_line[joint.name]})")
            first_line[joint.name] = element.line
            joints.append(joint)

    by_name = {j.name: j for j in joints}
    locked = _lock_positions(reader, dict(lock or {}), by_name, problems)
    couplings = _resolve_mimics(reader, joints, by_name, locked, problems, broken)
    problems.raise_if_any()  # the tree needs every link and joint

    root = _build_tree(reader, robot, links, joints)
    frames: dict[str, tuple[int, sp.Matrix]] = {}
    root_parts: list[_Body] | None = [] if floating else None
    tree = _flatten(reader, root, links, locked, frames, couplings, accept_invalid_inertia, problems, root_parts)
    problems.raise_if_any()
    if not tree:
        raise reader.error(robot, "robot", "the URDF has no moving joint (revolute, continuous or prismatic) "
                           "left to model" + (" after locking" if locked else ""))
    floating_base = None
    if floating:
        floating_base = _floating_base(reader, root, tree, _combine(root_parts))
    else:
        _warn_if_mobile_base(reader, root, links)

    parameters: tuple[Parameter, ...] = ()
    if runtime_parameters:
        tree, parameters = _parameterise(tree)
    # Free flight, other planets, a tilted set-up: gravity is settable at run time (a URDF does not state it).
    gravity_parameters = tuple(Parameter(f"gravity_{axis}", float(value), sp.Symbol(f"gravity_{axis}", real=True))
                               for axis, value in zip("xyz", GRAVITY))
    parameters += gravity_parameters
    gravity = sp.ImmutableMatrix([p.symbol for p in gravity_parameters])

    tool_link, tool_frame = -1, sp.eye(4)
    if tool is not None:
        if tool not in frames:
            raise reader.error(None, "tool", f"no link named {tool!r} in the URDF (links: {_preview(list(frames))})")
        tool_link, tool_frame = frames[tool]
        if tool_link < 0:
            where = ("is the floating base (its pose is q[:7])" if floating else
                     "is fixed to the base: it cannot carry a tool that moves")
            raise reader.error(links[tool].element, "tool", f"link {tool!r} {where}")

    coordinates, bodies = _coordinates(tree, couplings)
    digest_source = data if data is not None else (text if isinstance(text, bytes) else text.encode())
    summary = f"from URDF {Path(path).name}" + (f"; floating base {root.name}" if floating else "")
    if locked:
        summary += "; locked " + ", ".join(f"{k}={float(v):g}" for k, v in locked.items())
    if bodies:
        summary += "; coupled (mimic) " + ", ".join(
            f"{j.name} = {_affine(j.mimic, coordinates[j.mimic.source].name)}" for j in bodies if j.mimic is not None)
    return RobotDescription(name=name, path=path, source_sha256=hashlib.sha256(digest_source).hexdigest(),
                            summary=summary, parameters=parameters, gravity=gravity, base=sp.ImmutableMatrix(sp.eye(4)),
                            joints=coordinates, tool=sp.ImmutableMatrix(tool_frame), tool_link=tool_link,
                            bodies=bodies, floating_base=floating_base, frames=_frames(root, frames))


def _frames(root: _Link, frames: dict[str, tuple[int, sp.Matrix]]) -> tuple[Frame, ...]:
    """Every link as a named frame: the root first, then in the order the tree was walked."""
    order = [root.name] + [name for name in frames if name != root.name]
    return tuple(Frame(name, frames[name][0], sp.ImmutableMatrix(frames[name][1])) for name in order)


def _floating_base(reader: _Reader, root: _Link, tree: list[Joint], body: _Body) -> FloatingBase:
    """The free-flying root body: the root link and every link fixed to it. The whole robot must have mass,
    else nothing resists the base's motion and M is singular."""
    total = body.mass + sum((joint.inertial.mass for joint in tree), sp.Integer(0))
    if total == 0:
        raise reader.error(root.element, f"link[{root.name}]", "a floating base needs mass: no link of the robot "
                           "has any, so M would be singular")
    return FloatingBase(root.name, Inertial(body.mass, sp.ImmutableMatrix(body.com), sp.ImmutableMatrix(body.inertia),
                                            False), root.element.line)


# Words that name parts of legs, wheels and propellers; and root links that name mobile bases.
_LEG_WORDS = ("hip", "thigh", "knee", "shank", "shin", "calf", "ankle", "foot", "toe", "leg", "haa", "hfe", "kfe")
_WHEEL_WORDS = ("wheel", "caster")
_ROTOR_WORDS = ("rotor", "propeller")
_MOBILE_ROOTS = ("base_footprint", "odom", "chassis", "floating_base")


def _mobile_base_signs(root: _Link, links: dict[str, _Link]) -> list[str]:
    """Why the root link looks like a mobile base rather than a mount ([]: it does not).

    A URDF's root is fixed to the world, which is right for an arm on a table and wrong for a
    legged, wheeled or flying robot, whose root moves. The signs, any one of which counts:

    * legs: two or more limbs (the subtrees behind the moving joints nearest the root) have a
      joint or link named like a leg part (hip, thigh, knee, shank, shin, calf, ankle, foot, toe,
      leg, or ANYmal's HAA/HFE/KFE): humanoids and quadrupeds, not dual-arm robots or hands;
    * wheels: a moving joint or its child link named like a wheel or caster;
    * propellers: a moving joint or its child link named like a rotor or propeller;
    * the root's own name: base_footprint, odom, chassis, floating_base (ROS names for a base
      that moves in the world; a pelvis or trunk counts through its legs, as an upper body on a
      stand has none).

    A root named ``world`` is an explicit weld: no sign then."""
    if root.name.lower() == "world":
        return []
    limbs: list[list[str]] = []  # per limb: the names of its joints and links
    stack = [(root, None)]
    while stack:
        link, limb = stack.pop()
        for joint in link.child_joints:
            current = limb
            if current is None and joint.kind != "fixed":
                current = []
                limbs.append(current)
            if current is not None:
                current += [joint.name.lower(), joint.child.lower()]
            stack.append((links[joint.child], current))
    signs = []
    legs = sum(any(word in name for name in limb for word in _LEG_WORDS) for limb in limbs)
    if legs >= 2:
        signs.append(f"{legs} of its {len(limbs)} limbs have leg parts")
    names = [name for limb in limbs for name in limb]
    for words, what in ((_WHEEL_WORDS, "wheels"), (_ROTOR_WORDS, "propellers")):
        found = sorted({name for name in names if any(word in name for word in words)})
        if found:
            signs.append(f"{what} ({_preview(found, 4)})")
    if any(word in root.name.lower() for word in _MOBILE_ROOTS):
        signs.append(f"its name {root.name!r}")
    return signs


def _warn_if_mobile_base(reader: _Reader, root: _Link, links: dict[str, _Link]) -> None:
    signs = _mobile_base_signs(root, links)
    if signs:
        warnings.warn(DescriptionWarning(
            reader.path, root.element.line, f"link[{root.name}]",
            f"the root link {root.name!r} looks like a mobile base ({'; '.join(signs)}), but it is fixed to the "
            "world, as the URDF convention has it, so the dynamics is that of the robot with its base welded in "
            "place; for a base that moves freely, load it with base='floating' (robodyn.load) or --base floating"),
            stacklevel=3)


def _lock_positions(reader: _Reader, lock: dict, by_name: dict[str, _UJoint],
                    problems: DescriptionErrors) -> dict[str, sp.Expr]:
    """The exact position of every joint the caller locks, checked against its limits."""
    locked: dict[str, sp.Expr] = {}
    for joint_name, value in lock.items():
        with problems.section():
            joint = by_name.get(joint_name)
            if joint is None:
                raise reader.error(None, f"lock[{joint_name}]", f"no joint named {joint_name!r} in the URDF")
            if joint.kind not in MOVING_TYPES:
                raise reader.error(joint.element, f"lock[{joint_name}]",
                                   f"joint {joint_name!r} is {joint.kind}; only moving joints can be locked")
            try:
                position = _lock_value(value, joint.kind != "prismatic", reader)
            except (ValueError, TypeError, ExpressionError) as exc:
                raise reader.error(joint.element, f"lock[{joint_name}]", f"invalid position: {exc}") from None
            _check_within_limits(reader, joint, position, f"lock[{joint_name}]")
            locked[joint_name] = position
    return locked


def _check_within_limits(reader: _Reader, joint: _UJoint, position: sp.Expr, field_: str, why: str = "") -> None:
    low, high = joint.limits.lower, joint.limits.upper
    numeric = float(position)
    below = low is not None and numeric < low - LIMIT_TOLERANCE
    above = high is not None and numeric > high + LIMIT_TOLERANCE
    if below or above:
        bounds = f"[{'-inf' if low is None else f'{low:g}'}, {'inf' if high is None else f'{high:g}'}]"
        raise reader.error(joint.element, field_, f"position {numeric:g}{why} is outside the joint's limits {bounds}")


def _mimic_chain(reader: _Reader, joint: _UJoint, by_name: dict[str, _UJoint], locked: Mapping[str, sp.Expr],
                 broken: set[str]) -> tuple[_UJoint, sp.Expr, sp.Expr] | None:
    """Follow ``joint``'s mimics to the joint its chain ends at (one that mimics nothing, or a locked one other
    than ``joint``): (that joint, multiplier, offset), q_joint = multiplier * q_end + offset. None when the chain
    reaches a joint whose own problem is reported already (``broken``); a DescriptionError for a mimic of a
    missing or fixed joint and for a cycle."""
    multiplier, offset = sp.Integer(1), sp.Integer(0)
    current, seen = joint, [joint.name]
    while current.mimic is not None and (current is joint or current.name not in locked):
        mimic = current.mimic
        field_ = f"joint[{current.name}].mimic"
        source = by_name.get(mimic.joint)
        if source is None and mimic.joint in broken:
            return None
        if source is None:
            close = [n for n in by_name if n.endswith(mimic.joint)] or \
                difflib.get_close_matches(mimic.joint, list(by_name), 3)
            hint = f" (did you mean {' or '.join(repr(n) for n in close[:3])}?)" if close else ""
            raise reader.error(mimic.element, field_, f"joint {current.name!r} mimics {mimic.joint!r}, "
                               f"which is not a joint of this URDF{hint}")
        if source.kind not in MOVING_TYPES:
            raise reader.error(mimic.element, field_, f"joint {current.name!r} mimics {mimic.joint!r}, "
                               f"which is a {source.kind} joint (a mimic needs a moving joint to follow)")
        # q_joint = multiplier * q_current + offset, q_current = m * q_source + o
        multiplier, offset = multiplier * mimic.multiplier, multiplier * mimic.offset + offset
        if source.name in seen:
            names = " -> ".join(seen + [source.name])
            raise reader.error(mimic.element, field_, f"mimic joints form a cycle ({names}): "
                               "one of them must be driven by an independent joint")
        seen.append(source.name)
        current = source
    return current, multiplier, offset


def _lock_mimicked(reader: _Reader, joint: _UJoint, end: _UJoint, multiplier: sp.Expr, offset: sp.Expr,
                   locked: dict[str, sp.Expr]) -> None:
    """``joint`` mimics ``end`` (q_joint = multiplier * q_end + offset) and is locked: lock ``end`` where the
    coupling puts ``joint`` at its lock, or check that ``end``'s own lock does."""
    field_ = f"lock[{joint.name}]"
    wanted = locked[joint.name]
    relation = f"{joint.name} = {float(multiplier):g}*{end.name} {'-' if offset < 0 else '+'} {abs(float(offset)):g}"
    if end.name in locked or multiplier == 0:
        at = multiplier * locked[end.name] + offset if multiplier != 0 else offset
        if abs(float(at - wanted)) > LIMIT_TOLERANCE * max(1.0, abs(float(wanted))):
            reason = (f"{end.name!r} is locked at {float(locked[end.name]):g}" if multiplier != 0 else
                      "the multiplier is 0")
            raise reader.error(joint.element, field_, f"joint {joint.name!r} mimics {end.name!r} ({relation}) and "
                               f"is locked at {float(wanted):g}, but {reason}, which puts it at {float(at):g}: lock "
                               f"only {end.name!r} (its mimics follow it), or both consistently")
        return
    position = (wanted - offset) / multiplier
    position = reader.angle(position) if end.kind != "prismatic" else position
    _check_within_limits(reader, end, position, field_, f", which the lock of its mimic {joint.name!r} gives "
                         f"{end.name!r} ({relation}),")
    locked[end.name] = position


def _resolve_mimics(reader: _Reader, joints: list[_UJoint], by_name: dict[str, _UJoint],
                    locked: dict[str, sp.Expr], problems: DescriptionErrors,
                    broken: set[str] = frozenset()) -> dict[str, tuple[str, sp.Expr, sp.Expr]]:
    """Each unlocked mimic joint -> (independent joint, multiplier, offset), chains composed.

    A locked mimic joint locks the joint its chain ends at, at the position the coupling gives (a lock already
    there must agree), so that the mimic and what it follows stay coupled; one whose chain is broken (a mimic
    of a missing or fixed joint) is just locked. A mimic whose chain ends at a locked
    joint, or whose composed multiplier is 0, is added to ``locked`` at the position the coupling gives it."""
    couplings: dict[str, tuple[str, sp.Expr, sp.Expr]] = {}
    reported: set[tuple[int | None, str]] = set()  # a broken link of a chain is reported once

    def report(error: DescriptionError) -> None:
        if (error.line, error.message) not in reported:
            reported.add((error.line, error.message))
            problems.add(error)

    for joint in [j for j in joints if j.mimic is not None and j.kind in MOVING_TYPES and j.name in locked]:
        try:
            chain = _mimic_chain(reader, joint, by_name, locked, broken)
        except DescriptionError:  # a mimic of a missing or fixed joint: locking it is how such a file loads
            continue
        if chain is not None:
            with problems.section():
                _lock_mimicked(reader, joint, *chain, locked)
    for joint in joints:
        if joint.mimic is None or joint.kind not in MOVING_TYPES or joint.name in locked:
            continue
        try:
            chain = _mimic_chain(reader, joint, by_name, locked, broken)
            if chain is None:
                continue
            current, multiplier, offset = chain
            if current.name in locked or multiplier == 0:
                value = offset + (multiplier * locked[current.name] if multiplier != 0 else 0)
                locked[joint.name] = reader.angle(value) if joint.kind != "prismatic" else value
            else:
                couplings[joint.name] = (current.name, multiplier, offset)
        except DescriptionError as error:
            report(error)
    return couplings


def _coordinates(tree: list[Joint], couplings: Mapping[str, tuple[str, sp.Expr, sp.Expr]]
                 ) -> tuple[tuple[Joint, ...], tuple[Joint, ...]]:
    """(the model's coordinates, the tree with its couplings); the tree is () without couplings."""
    if not any(joint.name in couplings for joint in tree):
        return tuple(tree), ()
    independent = [i for i, joint in enumerate(tree) if joint.name not in couplings]
    index = {tree[i].name: k for k, i in enumerate(independent)}
    bodies = tuple(dataclasses.replace(joint, mimic=Mimic(index[couplings[joint.name][0]], *couplings[joint.name][1:]))
                   if joint.name in couplings else joint for joint in tree)
    coordinate = [index[couplings[j.name][0]] if j.name in couplings else index[j.name] for j in tree]
    parents = coordinate_parents(bodies, coordinate, len(independent))
    coordinates = tuple(dataclasses.replace(tree[i], parent=parents[k]) for k, i in enumerate(independent))
    return coordinates, bodies


def _affine(mimic: Mimic, source: str) -> str:
    text = source if mimic.multiplier == 1 else f"{float(mimic.multiplier):g}*{source}"
    return text if mimic.offset == 0 else f"{text} {'-' if mimic.offset < 0 else '+'} {abs(float(mimic.offset)):g}"


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
             frames: dict[str, tuple[int, sp.Matrix]] | None = None,
             couplings: Mapping[str, tuple[str, sp.Expr, sp.Expr]] | None = None,
             accept_invalid_inertia: bool = False, problems: DescriptionErrors | None = None,
             root_parts: list[_Body] | None = None) -> list[Joint]:
    """Moving joints depth-first from the root, with fixed (and locked) joints merged away.

    ``frames`` (if given) receives, for every link, the moving joint whose body carries it
    (-1: the base) and the link's pose in that body's frame. ``couplings`` (mimic joint ->
    its independent joint, ...) matter to the singularity check: a coordinate is singular when
    all the joints it moves carry nothing massive. Problems go to ``problems`` (if given).
    ``root_parts`` (a floating base) receives the mass properties of the links the root carries, in
    the root link's frame; without it they are dropped (a fixed base does not move)."""
    problems = problems if problems is not None else DescriptionErrors()
    couplings = couplings or {}
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
        elif root_parts is not None and link.body is not None:
            root_parts.append(_transform_body(link.body, frame))
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
        if link.check is not None and (carried_by.get(link.name, -1) >= 0 or root_parts is not None):
            with problems.section():
                _check_inertia(reader, *link.check, accept_invalid_inertia)

    bodies = [_combine(entry["parts"]) for entry in pending]
    # A joint whose whole subtree is massless makes M singular.
    subtree_mass = [b.mass for b in bodies]
    subtree_inertia = [b.inertia != sp.zeros(3, 3) for b in bodies]
    for index in reversed(range(len(pending))):
        parent = pending[index]["parent"]
        if parent >= 0:
            subtree_mass[parent] += subtree_mass[index]
            subtree_inertia[parent] = subtree_inertia[parent] or subtree_inertia[index]
    singular: dict[str, list[bool]] = {}  # independent joint -> per joint it moves: carries nothing
    for index, entry in enumerate(pending):
        joint = entry["joint"]
        empty = subtree_mass[index] == 0 and (joint.kind == "prismatic" or not subtree_inertia[index])
        singular.setdefault(couplings[joint.name][0] if joint.name in couplings else joint.name, []).append(empty)
    for entry in pending:
        joint = entry["joint"]
        if joint.name not in couplings and all(singular[joint.name]):
            link = links[joint.child]
            coupled = " (nor behind the joints that mimic it)" if len(singular[joint.name]) > 1 else ""
            with problems.section():
                raise reader.error(link.element, f"link[{link.name}]", f"link {link.name!r} carried by joint "
                                   f"{joint.name!r} has no mass and nothing massive beyond it{coupled}: "
                                   f"M would be singular (give it a mass, or lock it: --lock {joint.name}=0 on the "
                                   f"command line, lock={{{joint.name!r}: 0.0}} in robodyn.load)")

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

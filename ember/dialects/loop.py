"""Level `loop`: explicit loop nests over memrefs (the SCF level of the original work).

    %c = loop.const {value = 0} : index          %n = loop.dim %m {axis = 0} : index
    %m = loop.alloc %n : memref<?x8xf32>         (one operand per dynamic extent)
    loop.for %lb, %ub, %step (%i: index) { ... }
    loop.if %a, %b {pred = "lt"} () { ... }      (the body runs when a pred b holds)
    %v = loop.load %m, %i, %j : f32              loop.store %v, %m, %i, %j
    (a load of a byte memref, memref<..xu8>, may give another type: the bytes of one value from [i, j])
    integer: addi subi muli divi remi mini maxi (divi, remi: floor), cmpi {pred = "eq"|"ne"|"lt"|"le"} -> i1
    float:   addf subf mulf divf maxf minf;  loop.select %c, %a, %b;  loop.cast %x : f32
             loop.fmaf %a, %b, %c : f32  (a * b + c rounded once; f32 only)
Integer values of any width (index, i32, i64) may index memrefs.

Vector forms (made by `vectorize` and later passes; N lanes, masks are vector<Nxi1>):
    %v = loop.splat %x : vector<16xf32>          %i = loop.iota %base : vector<16xindex>
    %m = loop.tailmask %base, %ub : vector<16xi1>   (lane k on iff base + k < ub)
    %v = loop.vload %m, %i, %j, %mask : vector<16xf32>     contiguous from [i, j] along the last axis
    loop.vstore %v, %m, %i, %j, %mask
    %v = loop.gather %m, %i, %jv, %mask : vector<16xf32>   last index a vector of indices
    loop.scatter %v, %m, %i, %jv, %mask
float binaries and select also take vectors (a scalar select condition picks whole vectors).
Core variables live in registers across callbacks:  %k = loop.getvar {var = 0} : index,
loop.setvar %x {var = 0}.  They hold integers (counters), or vectors (accumulators that
`promote-accumulators` keeps in registers across a bag's lookups).
"""

from __future__ import annotations

from ..ir.core import Op, check, define
from ..ir.types import ScalarType, ShapedType, Type, reads_as

INT_BINARY = ("addi", "subi", "muli", "divi", "remi", "mini", "maxi")
FLOAT_BINARY = ("addf", "subf", "mulf", "divf", "maxf", "minf")
PREDICATES = ("eq", "ne", "lt", "le")
LOADS = ("loop.load", "loop.vload", "loop.gather")  # operand 0 is the memref read
STORES = ("loop.store", "loop.vstore", "loop.scatter")  # operand 1 is the memref written


def is_int(t: Type) -> bool:
    return isinstance(t, ScalarType) and t.is_int


def is_float(t: Type) -> bool:
    return isinstance(t, ScalarType) and t.is_float


def is_vector(t: Type, elem: str | None = None) -> bool:
    ok = isinstance(t, ShapedType) and t.kind == "vector" and t.rank == 1 and t.shape is not None
    return ok and (elem is None or (t.elem.name == "i1") == (elem == "i1") and (
        elem in ("i1", "any") or (t.elem.is_float if elem == "float" else t.elem.is_int)))


def lanes(t: Type) -> int:
    assert isinstance(t, ShapedType) and t.shape is not None and t.shape[0] is not None
    return t.shape[0]


def memref_of(op: Op, i: int) -> ShapedType:
    t = op.operands[i].type
    check(isinstance(t, ShapedType) and t.kind == "memref", op, f"operand {i} must be a memref, got {t}")
    assert isinstance(t, ShapedType)
    return t


@define("loop.const", results=1, attrs=("value",))
def _const(op: Op) -> None:
    t = op.result.type
    check(isinstance(t, ScalarType), op, "result must be a scalar")
    v = op.attrs["value"]
    check(isinstance(v, float) if is_float(t) else isinstance(v, int), op, f"value {v!r} does not fit {t}")


@define("loop.dim", operands=1, results=1, attrs=("axis",))
def _dim(op: Op) -> None:
    t = memref_of(op, 0)
    check(t.rank is not None and 0 <= op.attrs["axis"] < t.rank, op, f"axis out of range for {t}")
    check(is_int(op.result.type), op, "result must be an integer")


@define("loop.alloc", operands=(0, None), results=1)
def _alloc(op: Op) -> None:
    t = op.result.type
    ok = isinstance(t, ShapedType) and t.kind == "memref" and t.shape is not None
    check(ok, op, "result must be a ranked memref")
    assert isinstance(t, ShapedType) and t.shape is not None
    check(sum(d is None for d in t.shape) == len(op.operands), op, "needs one operand per dynamic extent")
    for v in op.operands:
        check(is_int(v.type), op, "extents must be integers")


@define("loop.for", operands=3, regions=1)
def _for(op: Op) -> None:
    for v in op.operands:
        check(is_int(v.type), op, f"bounds must be integers, got {v.type}")
    args = op.body.args
    check(len(args) == 1 and is_int(args[0].type), op, "body takes one integer induction variable")


@define("loop.if", operands=2, regions=1, attrs=("pred",))
def _if(op: Op) -> None:
    check(op.attrs["pred"] in PREDICATES, op, f"pred must be one of {', '.join(PREDICATES)}")
    check(all(is_int(v.type) for v in op.operands), op, "compares integers")
    check(not op.body.args, op, "body takes no arguments")


def _access(op: Op, first_index: int) -> None:
    t = memref_of(op, first_index)
    idx = op.operands[first_index + 1:]
    check(t.rank == len(idx), op, f"{t} needs {t.rank} indices, got {len(idx)}")
    for v in idx:
        check(is_int(v.type), op, f"indices must be integers, got {v.type}")


@define("loop.load", operands=(1, None), results=1)
def _load(op: Op) -> None:
    _access(op, 0)
    check(reads_as(memref_of(op, 0).elem, op.result.type), op,
          "result type must be the memref's element type (or, from a byte memref, a typed read)")


@define("loop.store", operands=(2, None))
def _store(op: Op) -> None:
    _access(op, 1)
    check(op.operands[0].type == memref_of(op, 1).elem, op, "stored value must have the memref's element type")


def _binary(kind: str) -> None:
    def verify(op: Op) -> None:
        a, b = (v.type for v in op.operands)
        if kind == "float" and is_vector(a, "float"):
            check(a == b == op.result.type, op, "vector operands and result must have one type")
            return
        ok = is_int if kind == "int" else is_float
        check(ok(a) and ok(b) and ok(op.result.type), op, f"needs {kind} operands and result")
        if kind == "float":
            check(a == b == op.result.type, op, "operands and result must have one type")

    return verify


for _n in INT_BINARY:
    define(f"loop.{_n}", operands=2, results=1)(_binary("int"))
for _n in FLOAT_BINARY:
    define(f"loop.{_n}", operands=2, results=1)(_binary("float"))


@define("loop.fmaf", operands=3, results=1)
def _fmaf(op: Op) -> None:
    t = op.result.type
    f32 = ScalarType("f32")
    check(t == f32 or (is_vector(t) and isinstance(t, ShapedType) and t.elem == f32), op,
          "fuses float32 values: the result must be f32 or a vector of f32")
    check(all(v.type == t for v in op.operands), op, "operands and result must have one type")


@define("loop.cmpi", operands=2, results=1, attrs=("pred",))
def _cmpi(op: Op) -> None:
    check(op.attrs["pred"] in PREDICATES, op, f"pred must be one of {', '.join(PREDICATES)}")
    check(all(is_int(v.type) for v in op.operands), op, "compares integers")
    check(op.result.type == ScalarType("i1"), op, "result must be i1")


@define("loop.select", operands=3, results=1)
def _select(op: Op) -> None:
    c, a, b = (v.type for v in op.operands)
    check(c == ScalarType("i1") or (is_vector(c, "i1") and is_vector(a) and lanes(c) == lanes(a)), op,
          "condition must be i1 (or a mask as wide as the values)")
    check(a == b == op.result.type, op, "both choices and the result must have one type")


@define("loop.cast", operands=1, results=1)
def _cast(op: Op) -> None:
    a, r = op.operands[0].type, op.result.type
    vectors = is_vector(a) and is_vector(r) and lanes(a) == lanes(r)
    check((isinstance(a, ScalarType) and isinstance(r, ScalarType)) or vectors, op,
          "casts a scalar, or a vector to a vector as wide")


@define("loop.splat", operands=1, results=1)
def _splat(op: Op) -> None:
    t = op.result.type
    check(is_vector(t) and isinstance(t, ShapedType) and t.elem == op.operands[0].type, op,
          "makes a vector of its scalar operand's type")


@define("loop.iota", operands=1, results=1)
def _iota(op: Op) -> None:
    check(is_int(op.operands[0].type) and is_vector(op.result.type, "int"), op, "makes an integer vector from a base")


@define("loop.tailmask", operands=2, results=1)
def _tailmask(op: Op) -> None:
    check(all(is_int(v.type) for v in op.operands) and is_vector(op.result.type, "i1"), op,
          "makes a vector<Nxi1> from integer base and bound")


def _vector_access(op: Op, first: int, contiguous: bool) -> ShapedType:
    """Operands from `first`: memref, indices (the last a scalar start or an index vector), mask."""
    t = memref_of(op, first)
    idx = op.operands[first + 1:-1]
    mask = op.operands[-1].type
    check(t.rank == len(idx), op, f"{t} needs {t.rank} indices, got {len(idx)}")
    check(all(is_int(v.type) for v in idx[:-1]), op, "all but the last index must be integers")
    last = idx[-1].type if idx else None
    check(is_int(last) if contiguous else is_vector(last, "int"), op,
          "the last index must be " + ("an integer start" if contiguous else "a vector of indices"))
    check(is_vector(mask, "i1"), op, "the last operand must be a vector<Nxi1> mask")
    return t


@define("loop.vload", operands=(3, None), results=1)
def _vload(op: Op) -> None:
    t = _vector_access(op, 0, True)
    r = op.result.type
    check(is_vector(r) and isinstance(r, ShapedType) and r.elem == t.elem and lanes(r) == lanes(op.operands[-1].type),
          op, "result must be a vector of the memref's element type, as wide as the mask")


@define("loop.gather", operands=(3, None), results=1)
def _gather(op: Op) -> None:
    t = _vector_access(op, 0, False)
    r = op.result.type
    check(is_vector(r) and isinstance(r, ShapedType) and r.elem == t.elem, op,
          "result must be a vector of the memref's element type")


@define("loop.vstore", operands=(4, None))
def _vstore(op: Op) -> None:
    t = _vector_access(op, 1, True)
    v = op.operands[0].type
    check(is_vector(v) and isinstance(v, ShapedType) and v.elem == t.elem, op, "stores a vector of the element type")


@define("loop.scatter", operands=(4, None))
def _scatter(op: Op) -> None:
    t = _vector_access(op, 1, False)
    v = op.operands[0].type
    check(is_vector(v) and isinstance(v, ShapedType) and v.elem == t.elem, op, "stores a vector of the element type")


@define("loop.getvar", results=1, attrs=("var",))
def _getvar(op: Op) -> None:
    check(is_int(op.result.type) or is_vector(op.result.type), op, "core variables hold integers or vectors")


@define("loop.setvar", operands=1, attrs=("var",))
def _setvar(op: Op) -> None:
    check(is_int(op.operands[0].type) or is_vector(op.operands[0].type), op, "core variables hold integers or vectors")

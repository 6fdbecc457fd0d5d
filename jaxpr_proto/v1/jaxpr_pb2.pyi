from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MemorySpace(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMORY_SPACE_DEVICE_UNSPECIFIED: _ClassVar[MemorySpace]
    MEMORY_SPACE_HOST: _ClassVar[MemorySpace]
    MEMORY_SPACE_ANY: _ClassVar[MemorySpace]

class Dtype(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DTYPE_UNSPECIFIED: _ClassVar[Dtype]
    DTYPE_BOOL: _ClassVar[Dtype]
    DTYPE_INT8: _ClassVar[Dtype]
    DTYPE_INT16: _ClassVar[Dtype]
    DTYPE_INT32: _ClassVar[Dtype]
    DTYPE_INT64: _ClassVar[Dtype]
    DTYPE_UINT8: _ClassVar[Dtype]
    DTYPE_UINT16: _ClassVar[Dtype]
    DTYPE_UINT32: _ClassVar[Dtype]
    DTYPE_UINT64: _ClassVar[Dtype]
    DTYPE_FLOAT16: _ClassVar[Dtype]
    DTYPE_FLOAT32: _ClassVar[Dtype]
    DTYPE_FLOAT64: _ClassVar[Dtype]
    DTYPE_BFLOAT16: _ClassVar[Dtype]
    DTYPE_COMPLEX64: _ClassVar[Dtype]
    DTYPE_COMPLEX128: _ClassVar[Dtype]
    DTYPE_INT2: _ClassVar[Dtype]
    DTYPE_INT4: _ClassVar[Dtype]
    DTYPE_UINT2: _ClassVar[Dtype]
    DTYPE_UINT4: _ClassVar[Dtype]
    DTYPE_FLOAT8_E3M4: _ClassVar[Dtype]
    DTYPE_FLOAT8_E4M3: _ClassVar[Dtype]
    DTYPE_FLOAT8_E4M3B11FNUZ: _ClassVar[Dtype]
    DTYPE_FLOAT8_E4M3FN: _ClassVar[Dtype]
    DTYPE_FLOAT8_E4M3FNUZ: _ClassVar[Dtype]
    DTYPE_FLOAT8_E5M2: _ClassVar[Dtype]
    DTYPE_FLOAT8_E5M2FNUZ: _ClassVar[Dtype]
    DTYPE_FLOAT8_E8M0FNU: _ClassVar[Dtype]
    DTYPE_FLOAT4_E2M1FN: _ClassVar[Dtype]
    DTYPE_FLOAT0: _ClassVar[Dtype]
    DTYPE_KEY: _ClassVar[Dtype]
    DTYPE_FLOAT6_E2M3FN: _ClassVar[Dtype]
    DTYPE_FLOAT6_E3M2FN: _ClassVar[Dtype]

class ArrayKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ARRAY_KIND_NUMPY_UNSPECIFIED: _ClassVar[ArrayKind]
    ARRAY_KIND_NUMPY_SCALAR: _ClassVar[ArrayKind]
    ARRAY_KIND_JAX: _ClassVar[ArrayKind]
    ARRAY_KIND_TYPED_NDARRAY: _ClassVar[ArrayKind]
    ARRAY_KIND_TYPED_INT: _ClassVar[ArrayKind]
    ARRAY_KIND_TYPED_FLOAT: _ClassVar[ArrayKind]
    ARRAY_KIND_TYPED_COMPLEX: _ClassVar[ArrayKind]

class TreeNodeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TREE_NODE_KIND_LEAF_UNSPECIFIED: _ClassVar[TreeNodeKind]
    TREE_NODE_KIND_NONE: _ClassVar[TreeNodeKind]
    TREE_NODE_KIND_TUPLE: _ClassVar[TreeNodeKind]
    TREE_NODE_KIND_LIST: _ClassVar[TreeNodeKind]
    TREE_NODE_KIND_DICT: _ClassVar[TreeNodeKind]
    TREE_NODE_KIND_NAMEDTUPLE: _ClassVar[TreeNodeKind]
    TREE_NODE_KIND_CUSTOM: _ClassVar[TreeNodeKind]

class AxisType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AXIS_TYPE_AUTO_UNSPECIFIED: _ClassVar[AxisType]
    AXIS_TYPE_EXPLICIT: _ClassVar[AxisType]
    AXIS_TYPE_MANUAL: _ClassVar[AxisType]
MEMORY_SPACE_DEVICE_UNSPECIFIED: MemorySpace
MEMORY_SPACE_HOST: MemorySpace
MEMORY_SPACE_ANY: MemorySpace
DTYPE_UNSPECIFIED: Dtype
DTYPE_BOOL: Dtype
DTYPE_INT8: Dtype
DTYPE_INT16: Dtype
DTYPE_INT32: Dtype
DTYPE_INT64: Dtype
DTYPE_UINT8: Dtype
DTYPE_UINT16: Dtype
DTYPE_UINT32: Dtype
DTYPE_UINT64: Dtype
DTYPE_FLOAT16: Dtype
DTYPE_FLOAT32: Dtype
DTYPE_FLOAT64: Dtype
DTYPE_BFLOAT16: Dtype
DTYPE_COMPLEX64: Dtype
DTYPE_COMPLEX128: Dtype
DTYPE_INT2: Dtype
DTYPE_INT4: Dtype
DTYPE_UINT2: Dtype
DTYPE_UINT4: Dtype
DTYPE_FLOAT8_E3M4: Dtype
DTYPE_FLOAT8_E4M3: Dtype
DTYPE_FLOAT8_E4M3B11FNUZ: Dtype
DTYPE_FLOAT8_E4M3FN: Dtype
DTYPE_FLOAT8_E4M3FNUZ: Dtype
DTYPE_FLOAT8_E5M2: Dtype
DTYPE_FLOAT8_E5M2FNUZ: Dtype
DTYPE_FLOAT8_E8M0FNU: Dtype
DTYPE_FLOAT4_E2M1FN: Dtype
DTYPE_FLOAT0: Dtype
DTYPE_KEY: Dtype
DTYPE_FLOAT6_E2M3FN: Dtype
DTYPE_FLOAT6_E3M2FN: Dtype
ARRAY_KIND_NUMPY_UNSPECIFIED: ArrayKind
ARRAY_KIND_NUMPY_SCALAR: ArrayKind
ARRAY_KIND_JAX: ArrayKind
ARRAY_KIND_TYPED_NDARRAY: ArrayKind
ARRAY_KIND_TYPED_INT: ArrayKind
ARRAY_KIND_TYPED_FLOAT: ArrayKind
ARRAY_KIND_TYPED_COMPLEX: ArrayKind
TREE_NODE_KIND_LEAF_UNSPECIFIED: TreeNodeKind
TREE_NODE_KIND_NONE: TreeNodeKind
TREE_NODE_KIND_TUPLE: TreeNodeKind
TREE_NODE_KIND_LIST: TreeNodeKind
TREE_NODE_KIND_DICT: TreeNodeKind
TREE_NODE_KIND_NAMEDTUPLE: TreeNodeKind
TREE_NODE_KIND_CUSTOM: TreeNodeKind
AXIS_TYPE_AUTO_UNSPECIFIED: AxisType
AXIS_TYPE_EXPLICIT: AxisType
AXIS_TYPE_MANUAL: AxisType

class Module(_message.Message):
    __slots__ = ("format_version", "producer", "root", "jaxprs", "closed_jaxprs", "avals", "strings", "frames", "tracebacks", "name_stacks", "contexts", "primitives", "namespaces", "rules", "required_features", "function", "symbolic_scope", "params")
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    JAXPRS_FIELD_NUMBER: _ClassVar[int]
    CLOSED_JAXPRS_FIELD_NUMBER: _ClassVar[int]
    AVALS_FIELD_NUMBER: _ClassVar[int]
    STRINGS_FIELD_NUMBER: _ClassVar[int]
    FRAMES_FIELD_NUMBER: _ClassVar[int]
    TRACEBACKS_FIELD_NUMBER: _ClassVar[int]
    NAME_STACKS_FIELD_NUMBER: _ClassVar[int]
    CONTEXTS_FIELD_NUMBER: _ClassVar[int]
    PRIMITIVES_FIELD_NUMBER: _ClassVar[int]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_FEATURES_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    SYMBOLIC_SCOPE_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    format_version: FormatVersion
    producer: Producer
    root: int
    jaxprs: _containers.RepeatedCompositeFieldContainer[Jaxpr]
    closed_jaxprs: _containers.RepeatedCompositeFieldContainer[ClosedJaxpr]
    avals: _containers.RepeatedCompositeFieldContainer[Aval]
    strings: _containers.RepeatedScalarFieldContainer[str]
    frames: _containers.RepeatedCompositeFieldContainer[Frame]
    tracebacks: _containers.RepeatedCompositeFieldContainer[Traceback]
    name_stacks: _containers.RepeatedCompositeFieldContainer[NameStack]
    contexts: _containers.RepeatedCompositeFieldContainer[EqnContext]
    primitives: _containers.RepeatedCompositeFieldContainer[PrimitiveName]
    namespaces: _containers.RepeatedCompositeFieldContainer[NamespaceVersion]
    rules: _containers.RepeatedCompositeFieldContainer[CustomRule]
    required_features: _containers.RepeatedScalarFieldContainer[str]
    function: FunctionSignature
    symbolic_scope: SymbolicScope
    params: _containers.RepeatedCompositeFieldContainer[Param]
    def __init__(self, format_version: _Optional[_Union[FormatVersion, _Mapping]] = ..., producer: _Optional[_Union[Producer, _Mapping]] = ..., root: _Optional[int] = ..., jaxprs: _Optional[_Iterable[_Union[Jaxpr, _Mapping]]] = ..., closed_jaxprs: _Optional[_Iterable[_Union[ClosedJaxpr, _Mapping]]] = ..., avals: _Optional[_Iterable[_Union[Aval, _Mapping]]] = ..., strings: _Optional[_Iterable[str]] = ..., frames: _Optional[_Iterable[_Union[Frame, _Mapping]]] = ..., tracebacks: _Optional[_Iterable[_Union[Traceback, _Mapping]]] = ..., name_stacks: _Optional[_Iterable[_Union[NameStack, _Mapping]]] = ..., contexts: _Optional[_Iterable[_Union[EqnContext, _Mapping]]] = ..., primitives: _Optional[_Iterable[_Union[PrimitiveName, _Mapping]]] = ..., namespaces: _Optional[_Iterable[_Union[NamespaceVersion, _Mapping]]] = ..., rules: _Optional[_Iterable[_Union[CustomRule, _Mapping]]] = ..., required_features: _Optional[_Iterable[str]] = ..., function: _Optional[_Union[FunctionSignature, _Mapping]] = ..., symbolic_scope: _Optional[_Union[SymbolicScope, _Mapping]] = ..., params: _Optional[_Iterable[_Union[Param, _Mapping]]] = ...) -> None: ...

class FormatVersion(_message.Message):
    __slots__ = ("major", "minor")
    MAJOR_FIELD_NUMBER: _ClassVar[int]
    MINOR_FIELD_NUMBER: _ClassVar[int]
    major: int
    minor: int
    def __init__(self, major: _Optional[int] = ..., minor: _Optional[int] = ...) -> None: ...

class Producer(_message.Message):
    __slots__ = ("jaxpr_proto_version", "jax_version", "jaxlib_version")
    JAXPR_PROTO_VERSION_FIELD_NUMBER: _ClassVar[int]
    JAX_VERSION_FIELD_NUMBER: _ClassVar[int]
    JAXLIB_VERSION_FIELD_NUMBER: _ClassVar[int]
    jaxpr_proto_version: str
    jax_version: str
    jaxlib_version: str
    def __init__(self, jaxpr_proto_version: _Optional[str] = ..., jax_version: _Optional[str] = ..., jaxlib_version: _Optional[str] = ...) -> None: ...

class NamespaceVersion(_message.Message):
    __slots__ = ("namespace", "version")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    version: str
    def __init__(self, namespace: _Optional[str] = ..., version: _Optional[str] = ...) -> None: ...

class PrimitiveName(_message.Message):
    __slots__ = ("namespace", "name")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class SymbolicScope(_message.Message):
    __slots__ = ("constraints",)
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    constraints: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, constraints: _Optional[_Iterable[str]] = ...) -> None: ...

class Jaxpr(_message.Message):
    __slots__ = ("constvars", "invars", "outvars", "eqns", "effects", "debug_info", "is_high", "columns")
    CONSTVARS_FIELD_NUMBER: _ClassVar[int]
    INVARS_FIELD_NUMBER: _ClassVar[int]
    OUTVARS_FIELD_NUMBER: _ClassVar[int]
    EQNS_FIELD_NUMBER: _ClassVar[int]
    EFFECTS_FIELD_NUMBER: _ClassVar[int]
    DEBUG_INFO_FIELD_NUMBER: _ClassVar[int]
    IS_HIGH_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    constvars: _containers.RepeatedCompositeFieldContainer[Var]
    invars: _containers.RepeatedCompositeFieldContainer[Var]
    outvars: _containers.RepeatedCompositeFieldContainer[Atom]
    eqns: _containers.RepeatedCompositeFieldContainer[Eqn]
    effects: _containers.RepeatedCompositeFieldContainer[Effect]
    debug_info: DebugInfo
    is_high: bool
    columns: EqnColumns
    def __init__(self, constvars: _Optional[_Iterable[_Union[Var, _Mapping]]] = ..., invars: _Optional[_Iterable[_Union[Var, _Mapping]]] = ..., outvars: _Optional[_Iterable[_Union[Atom, _Mapping]]] = ..., eqns: _Optional[_Iterable[_Union[Eqn, _Mapping]]] = ..., effects: _Optional[_Iterable[_Union[Effect, _Mapping]]] = ..., debug_info: _Optional[_Union[DebugInfo, _Mapping]] = ..., is_high: _Optional[bool] = ..., columns: _Optional[_Union[EqnColumns, _Mapping]] = ...) -> None: ...

class EqnColumns(_message.Message):
    __slots__ = ("primitive", "operand_count", "operands", "literals", "result_count", "results", "result_avals", "param_count", "params", "traceback", "name_stack", "context", "effects")
    PRIMITIVE_FIELD_NUMBER: _ClassVar[int]
    OPERAND_COUNT_FIELD_NUMBER: _ClassVar[int]
    OPERANDS_FIELD_NUMBER: _ClassVar[int]
    LITERALS_FIELD_NUMBER: _ClassVar[int]
    RESULT_COUNT_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    RESULT_AVALS_FIELD_NUMBER: _ClassVar[int]
    PARAM_COUNT_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    TRACEBACK_FIELD_NUMBER: _ClassVar[int]
    NAME_STACK_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    EFFECTS_FIELD_NUMBER: _ClassVar[int]
    primitive: _containers.RepeatedScalarFieldContainer[int]
    operand_count: _containers.RepeatedScalarFieldContainer[int]
    operands: _containers.RepeatedScalarFieldContainer[int]
    literals: _containers.RepeatedCompositeFieldContainer[Literal]
    result_count: _containers.RepeatedScalarFieldContainer[int]
    results: _containers.RepeatedScalarFieldContainer[int]
    result_avals: _containers.RepeatedScalarFieldContainer[int]
    param_count: _containers.RepeatedScalarFieldContainer[int]
    params: _containers.RepeatedScalarFieldContainer[int]
    traceback: _containers.RepeatedScalarFieldContainer[int]
    name_stack: _containers.RepeatedScalarFieldContainer[int]
    context: _containers.RepeatedScalarFieldContainer[int]
    effects: _containers.RepeatedCompositeFieldContainer[EqnEffects]
    def __init__(self, primitive: _Optional[_Iterable[int]] = ..., operand_count: _Optional[_Iterable[int]] = ..., operands: _Optional[_Iterable[int]] = ..., literals: _Optional[_Iterable[_Union[Literal, _Mapping]]] = ..., result_count: _Optional[_Iterable[int]] = ..., results: _Optional[_Iterable[int]] = ..., result_avals: _Optional[_Iterable[int]] = ..., param_count: _Optional[_Iterable[int]] = ..., params: _Optional[_Iterable[int]] = ..., traceback: _Optional[_Iterable[int]] = ..., name_stack: _Optional[_Iterable[int]] = ..., context: _Optional[_Iterable[int]] = ..., effects: _Optional[_Iterable[_Union[EqnEffects, _Mapping]]] = ...) -> None: ...

class EqnEffects(_message.Message):
    __slots__ = ("eqn", "effects")
    EQN_FIELD_NUMBER: _ClassVar[int]
    EFFECTS_FIELD_NUMBER: _ClassVar[int]
    eqn: int
    effects: _containers.RepeatedCompositeFieldContainer[Effect]
    def __init__(self, eqn: _Optional[int] = ..., effects: _Optional[_Iterable[_Union[Effect, _Mapping]]] = ...) -> None: ...

class ClosedJaxpr(_message.Message):
    __slots__ = ("jaxpr", "consts", "own_jaxpr", "same_vars")
    JAXPR_FIELD_NUMBER: _ClassVar[int]
    CONSTS_FIELD_NUMBER: _ClassVar[int]
    OWN_JAXPR_FIELD_NUMBER: _ClassVar[int]
    SAME_VARS_FIELD_NUMBER: _ClassVar[int]
    jaxpr: int
    consts: _containers.RepeatedCompositeFieldContainer[Value]
    own_jaxpr: bool
    same_vars: bool
    def __init__(self, jaxpr: _Optional[int] = ..., consts: _Optional[_Iterable[_Union[Value, _Mapping]]] = ..., own_jaxpr: _Optional[bool] = ..., same_vars: _Optional[bool] = ...) -> None: ...

class DebugInfo(_message.Message):
    __slots__ = ("traced_for", "func_src_info", "arg_names", "result_paths")
    TRACED_FOR_FIELD_NUMBER: _ClassVar[int]
    FUNC_SRC_INFO_FIELD_NUMBER: _ClassVar[int]
    ARG_NAMES_FIELD_NUMBER: _ClassVar[int]
    RESULT_PATHS_FIELD_NUMBER: _ClassVar[int]
    traced_for: str
    func_src_info: str
    arg_names: OptionalStrings
    result_paths: OptionalStrings
    def __init__(self, traced_for: _Optional[str] = ..., func_src_info: _Optional[str] = ..., arg_names: _Optional[_Union[OptionalStrings, _Mapping]] = ..., result_paths: _Optional[_Union[OptionalStrings, _Mapping]] = ...) -> None: ...

class OptionalStrings(_message.Message):
    __slots__ = ("values", "missing")
    VALUES_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[str]
    missing: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, values: _Optional[_Iterable[str]] = ..., missing: _Optional[_Iterable[int]] = ...) -> None: ...

class Var(_message.Message):
    __slots__ = ("id", "aval")
    ID_FIELD_NUMBER: _ClassVar[int]
    AVAL_FIELD_NUMBER: _ClassVar[int]
    id: int
    aval: int
    def __init__(self, id: _Optional[int] = ..., aval: _Optional[int] = ...) -> None: ...

class DropVar(_message.Message):
    __slots__ = ("aval",)
    AVAL_FIELD_NUMBER: _ClassVar[int]
    aval: int
    def __init__(self, aval: _Optional[int] = ...) -> None: ...

class Binder(_message.Message):
    __slots__ = ("var", "drop")
    VAR_FIELD_NUMBER: _ClassVar[int]
    DROP_FIELD_NUMBER: _ClassVar[int]
    var: Var
    drop: DropVar
    def __init__(self, var: _Optional[_Union[Var, _Mapping]] = ..., drop: _Optional[_Union[DropVar, _Mapping]] = ...) -> None: ...

class Literal(_message.Message):
    __slots__ = ("value", "aval")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    AVAL_FIELD_NUMBER: _ClassVar[int]
    value: Value
    aval: int
    def __init__(self, value: _Optional[_Union[Value, _Mapping]] = ..., aval: _Optional[int] = ...) -> None: ...

class Atom(_message.Message):
    __slots__ = ("var", "literal")
    VAR_FIELD_NUMBER: _ClassVar[int]
    LITERAL_FIELD_NUMBER: _ClassVar[int]
    var: int
    literal: Literal
    def __init__(self, var: _Optional[int] = ..., literal: _Optional[_Union[Literal, _Mapping]] = ...) -> None: ...

class Eqn(_message.Message):
    __slots__ = ("primitive", "invars", "outvars", "params", "effects", "traceback", "name_stack", "context")
    PRIMITIVE_FIELD_NUMBER: _ClassVar[int]
    INVARS_FIELD_NUMBER: _ClassVar[int]
    OUTVARS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    EFFECTS_FIELD_NUMBER: _ClassVar[int]
    TRACEBACK_FIELD_NUMBER: _ClassVar[int]
    NAME_STACK_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    primitive: int
    invars: _containers.RepeatedCompositeFieldContainer[Atom]
    outvars: _containers.RepeatedCompositeFieldContainer[Binder]
    params: _containers.RepeatedScalarFieldContainer[int]
    effects: _containers.RepeatedCompositeFieldContainer[Effect]
    traceback: int
    name_stack: int
    context: int
    def __init__(self, primitive: _Optional[int] = ..., invars: _Optional[_Iterable[_Union[Atom, _Mapping]]] = ..., outvars: _Optional[_Iterable[_Union[Binder, _Mapping]]] = ..., params: _Optional[_Iterable[int]] = ..., effects: _Optional[_Iterable[_Union[Effect, _Mapping]]] = ..., traceback: _Optional[int] = ..., name_stack: _Optional[int] = ..., context: _Optional[int] = ...) -> None: ...

class Param(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: Value
    def __init__(self, name: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...

class Effect(_message.Message):
    __slots__ = ("name", "input_var", "axis_name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_VAR_FIELD_NUMBER: _ClassVar[int]
    AXIS_NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    input_var: int
    axis_name: str
    value: Value
    def __init__(self, name: _Optional[str] = ..., input_var: _Optional[int] = ..., axis_name: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...

class Frame(_message.Message):
    __slots__ = ("file", "function", "line", "column", "end_line", "end_column")
    FILE_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    END_LINE_FIELD_NUMBER: _ClassVar[int]
    END_COLUMN_FIELD_NUMBER: _ClassVar[int]
    file: int
    function: int
    line: int
    column: int
    end_line: int
    end_column: int
    def __init__(self, file: _Optional[int] = ..., function: _Optional[int] = ..., line: _Optional[int] = ..., column: _Optional[int] = ..., end_line: _Optional[int] = ..., end_column: _Optional[int] = ...) -> None: ...

class Traceback(_message.Message):
    __slots__ = ("frames",)
    FRAMES_FIELD_NUMBER: _ClassVar[int]
    frames: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, frames: _Optional[_Iterable[int]] = ...) -> None: ...

class NameStack(_message.Message):
    __slots__ = ("scopes",)
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    scopes: _containers.RepeatedCompositeFieldContainer[NameScope]
    def __init__(self, scopes: _Optional[_Iterable[_Union[NameScope, _Mapping]]] = ...) -> None: ...

class NameScope(_message.Message):
    __slots__ = ("name", "transform")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TRANSFORM_FIELD_NUMBER: _ClassVar[int]
    name: str
    transform: bool
    def __init__(self, name: _Optional[str] = ..., transform: _Optional[bool] = ...) -> None: ...

class EqnContext(_message.Message):
    __slots__ = ("compute_type", "threefry_partitionable", "cur_abstract_mesh", "remove_size_one_mesh_axis", "xla_metadata", "fields")
    COMPUTE_TYPE_FIELD_NUMBER: _ClassVar[int]
    THREEFRY_PARTITIONABLE_FIELD_NUMBER: _ClassVar[int]
    CUR_ABSTRACT_MESH_FIELD_NUMBER: _ClassVar[int]
    REMOVE_SIZE_ONE_MESH_AXIS_FIELD_NUMBER: _ClassVar[int]
    XLA_METADATA_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    compute_type: str
    threefry_partitionable: bool
    cur_abstract_mesh: Mesh
    remove_size_one_mesh_axis: bool
    xla_metadata: Value
    fields: _containers.RepeatedCompositeFieldContainer[Param]
    def __init__(self, compute_type: _Optional[str] = ..., threefry_partitionable: _Optional[bool] = ..., cur_abstract_mesh: _Optional[_Union[Mesh, _Mapping]] = ..., remove_size_one_mesh_axis: _Optional[bool] = ..., xla_metadata: _Optional[_Union[Value, _Mapping]] = ..., fields: _Optional[_Iterable[_Union[Param, _Mapping]]] = ...) -> None: ...

class Aval(_message.Message):
    __slots__ = ("shaped_array", "token", "ref")
    SHAPED_ARRAY_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    shaped_array: ShapedArray
    token: AbstractToken
    ref: AbstractRef
    def __init__(self, shaped_array: _Optional[_Union[ShapedArray, _Mapping]] = ..., token: _Optional[_Union[AbstractToken, _Mapping]] = ..., ref: _Optional[_Union[AbstractRef, _Mapping]] = ...) -> None: ...

class Dim(_message.Message):
    __slots__ = ("constant", "symbolic")
    CONSTANT_FIELD_NUMBER: _ClassVar[int]
    SYMBOLIC_FIELD_NUMBER: _ClassVar[int]
    constant: int
    symbolic: str
    def __init__(self, constant: _Optional[int] = ..., symbolic: _Optional[str] = ...) -> None: ...

class ShapedArray(_message.Message):
    __slots__ = ("shape", "dtype", "key_impl", "weak_type", "sharding", "varying", "unreduced", "reduced", "memory_space")
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    KEY_IMPL_FIELD_NUMBER: _ClassVar[int]
    WEAK_TYPE_FIELD_NUMBER: _ClassVar[int]
    SHARDING_FIELD_NUMBER: _ClassVar[int]
    VARYING_FIELD_NUMBER: _ClassVar[int]
    UNREDUCED_FIELD_NUMBER: _ClassVar[int]
    REDUCED_FIELD_NUMBER: _ClassVar[int]
    MEMORY_SPACE_FIELD_NUMBER: _ClassVar[int]
    shape: _containers.RepeatedCompositeFieldContainer[Dim]
    dtype: Dtype
    key_impl: str
    weak_type: bool
    sharding: NamedSharding
    varying: _containers.RepeatedScalarFieldContainer[str]
    unreduced: _containers.RepeatedScalarFieldContainer[str]
    reduced: _containers.RepeatedScalarFieldContainer[str]
    memory_space: MemorySpace
    def __init__(self, shape: _Optional[_Iterable[_Union[Dim, _Mapping]]] = ..., dtype: _Optional[_Union[Dtype, str]] = ..., key_impl: _Optional[str] = ..., weak_type: _Optional[bool] = ..., sharding: _Optional[_Union[NamedSharding, _Mapping]] = ..., varying: _Optional[_Iterable[str]] = ..., unreduced: _Optional[_Iterable[str]] = ..., reduced: _Optional[_Iterable[str]] = ..., memory_space: _Optional[_Union[MemorySpace, str]] = ...) -> None: ...

class AbstractToken(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AbstractRef(_message.Message):
    __slots__ = ("inner", "memory_space", "kind")
    INNER_FIELD_NUMBER: _ClassVar[int]
    MEMORY_SPACE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    inner: int
    memory_space: Value
    kind: Value
    def __init__(self, inner: _Optional[int] = ..., memory_space: _Optional[_Union[Value, _Mapping]] = ..., kind: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...

class Array(_message.Message):
    __slots__ = ("dtype", "shape", "data", "key_impl", "kind", "external")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    KEY_IMPL_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_FIELD_NUMBER: _ClassVar[int]
    dtype: Dtype
    shape: _containers.RepeatedScalarFieldContainer[int]
    data: bytes
    key_impl: str
    kind: ArrayKind
    external: ExternalData
    def __init__(self, dtype: _Optional[_Union[Dtype, str]] = ..., shape: _Optional[_Iterable[int]] = ..., data: _Optional[bytes] = ..., key_impl: _Optional[str] = ..., kind: _Optional[_Union[ArrayKind, str]] = ..., external: _Optional[_Union[ExternalData, _Mapping]] = ...) -> None: ...

class ExternalData(_message.Message):
    __slots__ = ("location", "offset", "length", "sha256")
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    location: str
    offset: int
    length: int
    sha256: bytes
    def __init__(self, location: _Optional[str] = ..., offset: _Optional[int] = ..., length: _Optional[int] = ..., sha256: _Optional[bytes] = ...) -> None: ...

class Complex(_message.Message):
    __slots__ = ("real", "imag")
    REAL_FIELD_NUMBER: _ClassVar[int]
    IMAG_FIELD_NUMBER: _ClassVar[int]
    real: float
    imag: float
    def __init__(self, real: _Optional[float] = ..., imag: _Optional[float] = ...) -> None: ...

class ValueList(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[Value]
    def __init__(self, items: _Optional[_Iterable[_Union[Value, _Mapping]]] = ...) -> None: ...

class Dict(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[DictEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[DictEntry, _Mapping]]] = ...) -> None: ...

class DictEntry(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: Value
    value: Value
    def __init__(self, key: _Optional[_Union[Value, _Mapping]] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...

class EnumValue(_message.Message):
    __slots__ = ("type", "member")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    type: str
    member: str
    def __init__(self, type: _Optional[str] = ..., member: _Optional[str] = ...) -> None: ...

class Record(_message.Message):
    __slots__ = ("type", "fields")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    type: str
    fields: _containers.RepeatedCompositeFieldContainer[RecordField]
    def __init__(self, type: _Optional[str] = ..., fields: _Optional[_Iterable[_Union[RecordField, _Mapping]]] = ...) -> None: ...

class RecordField(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: Value
    def __init__(self, name: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...

class TreeDef(_message.Message):
    __slots__ = ("root",)
    ROOT_FIELD_NUMBER: _ClassVar[int]
    root: TreeNode
    def __init__(self, root: _Optional[_Union[TreeNode, _Mapping]] = ...) -> None: ...

class TreeNode(_message.Message):
    __slots__ = ("kind", "children", "keys", "type", "aux")
    KIND_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    AUX_FIELD_NUMBER: _ClassVar[int]
    kind: TreeNodeKind
    children: _containers.RepeatedCompositeFieldContainer[TreeNode]
    keys: _containers.RepeatedCompositeFieldContainer[Value]
    type: str
    aux: Value
    def __init__(self, kind: _Optional[_Union[TreeNodeKind, str]] = ..., children: _Optional[_Iterable[_Union[TreeNode, _Mapping]]] = ..., keys: _Optional[_Iterable[_Union[Value, _Mapping]]] = ..., type: _Optional[str] = ..., aux: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...

class MeshAxis(_message.Message):
    __slots__ = ("name", "size", "type")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    size: int
    type: AxisType
    def __init__(self, name: _Optional[str] = ..., size: _Optional[int] = ..., type: _Optional[_Union[AxisType, str]] = ...) -> None: ...

class Mesh(_message.Message):
    __slots__ = ("axes", "concrete", "device_ids", "abstract_device")
    AXES_FIELD_NUMBER: _ClassVar[int]
    CONCRETE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_IDS_FIELD_NUMBER: _ClassVar[int]
    ABSTRACT_DEVICE_FIELD_NUMBER: _ClassVar[int]
    axes: _containers.RepeatedCompositeFieldContainer[MeshAxis]
    concrete: bool
    device_ids: _containers.RepeatedScalarFieldContainer[int]
    abstract_device: AbstractDevice
    def __init__(self, axes: _Optional[_Iterable[_Union[MeshAxis, _Mapping]]] = ..., concrete: _Optional[bool] = ..., device_ids: _Optional[_Iterable[int]] = ..., abstract_device: _Optional[_Union[AbstractDevice, _Mapping]] = ...) -> None: ...

class AbstractDevice(_message.Message):
    __slots__ = ("device_kind", "num_cores", "platform")
    DEVICE_KIND_FIELD_NUMBER: _ClassVar[int]
    NUM_CORES_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    device_kind: str
    num_cores: int
    platform: str
    def __init__(self, device_kind: _Optional[str] = ..., num_cores: _Optional[int] = ..., platform: _Optional[str] = ...) -> None: ...

class PartitionSpecEntry(_message.Message):
    __slots__ = ("none", "unconstrained", "axes")
    NONE_FIELD_NUMBER: _ClassVar[int]
    UNCONSTRAINED_FIELD_NUMBER: _ClassVar[int]
    AXES_FIELD_NUMBER: _ClassVar[int]
    none: bool
    unconstrained: bool
    axes: AxisNames
    def __init__(self, none: _Optional[bool] = ..., unconstrained: _Optional[bool] = ..., axes: _Optional[_Union[AxisNames, _Mapping]] = ...) -> None: ...

class AxisNames(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class PartitionSpec(_message.Message):
    __slots__ = ("entries", "unreduced", "reduced", "unreduced_kind")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    UNREDUCED_FIELD_NUMBER: _ClassVar[int]
    REDUCED_FIELD_NUMBER: _ClassVar[int]
    UNREDUCED_KIND_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[PartitionSpecEntry]
    unreduced: _containers.RepeatedScalarFieldContainer[str]
    reduced: _containers.RepeatedScalarFieldContainer[str]
    unreduced_kind: str
    def __init__(self, entries: _Optional[_Iterable[_Union[PartitionSpecEntry, _Mapping]]] = ..., unreduced: _Optional[_Iterable[str]] = ..., reduced: _Optional[_Iterable[str]] = ..., unreduced_kind: _Optional[str] = ...) -> None: ...

class NamedSharding(_message.Message):
    __slots__ = ("mesh", "spec", "memory_kind")
    MESH_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    MEMORY_KIND_FIELD_NUMBER: _ClassVar[int]
    mesh: Mesh
    spec: PartitionSpec
    memory_kind: str
    def __init__(self, mesh: _Optional[_Union[Mesh, _Mapping]] = ..., spec: _Optional[_Union[PartitionSpec, _Mapping]] = ..., memory_kind: _Optional[str] = ...) -> None: ...

class PrimitiveRef(_message.Message):
    __slots__ = ("index",)
    INDEX_FIELD_NUMBER: _ClassVar[int]
    index: int
    def __init__(self, index: _Optional[int] = ...) -> None: ...

class NoneValue(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Value(_message.Message):
    __slots__ = ("none", "bool", "int", "float", "complex", "str", "bytes", "dtype", "array", "tuple", "list", "dict", "jaxpr", "closed_jaxpr", "enum", "record", "treedef", "mesh", "partition_spec", "named_sharding", "primitive", "rule", "aval", "frozenset", "big_int", "extension", "singleton", "symbolic_dim", "traceback", "function")
    NONE_FIELD_NUMBER: _ClassVar[int]
    BOOL_FIELD_NUMBER: _ClassVar[int]
    INT_FIELD_NUMBER: _ClassVar[int]
    FLOAT_FIELD_NUMBER: _ClassVar[int]
    COMPLEX_FIELD_NUMBER: _ClassVar[int]
    STR_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    ARRAY_FIELD_NUMBER: _ClassVar[int]
    TUPLE_FIELD_NUMBER: _ClassVar[int]
    LIST_FIELD_NUMBER: _ClassVar[int]
    DICT_FIELD_NUMBER: _ClassVar[int]
    JAXPR_FIELD_NUMBER: _ClassVar[int]
    CLOSED_JAXPR_FIELD_NUMBER: _ClassVar[int]
    ENUM_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    TREEDEF_FIELD_NUMBER: _ClassVar[int]
    MESH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_SPEC_FIELD_NUMBER: _ClassVar[int]
    NAMED_SHARDING_FIELD_NUMBER: _ClassVar[int]
    PRIMITIVE_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    AVAL_FIELD_NUMBER: _ClassVar[int]
    FROZENSET_FIELD_NUMBER: _ClassVar[int]
    BIG_INT_FIELD_NUMBER: _ClassVar[int]
    EXTENSION_FIELD_NUMBER: _ClassVar[int]
    SINGLETON_FIELD_NUMBER: _ClassVar[int]
    SYMBOLIC_DIM_FIELD_NUMBER: _ClassVar[int]
    TRACEBACK_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    none: NoneValue
    bool: bool
    int: int
    float: float
    complex: Complex
    str: str
    bytes: bytes
    dtype: DtypeValue
    array: Array
    tuple: ValueList
    list: ValueList
    dict: Dict
    jaxpr: int
    closed_jaxpr: int
    enum: EnumValue
    record: Record
    treedef: TreeDef
    mesh: Mesh
    partition_spec: PartitionSpec
    named_sharding: NamedSharding
    primitive: PrimitiveRef
    rule: int
    aval: int
    frozenset: ValueList
    big_int: str
    extension: Extension
    singleton: str
    symbolic_dim: str
    traceback: int
    function: str
    def __init__(self, none: _Optional[_Union[NoneValue, _Mapping]] = ..., bool: _Optional[bool] = ..., int: _Optional[int] = ..., float: _Optional[float] = ..., complex: _Optional[_Union[Complex, _Mapping]] = ..., str: _Optional[str] = ..., bytes: _Optional[bytes] = ..., dtype: _Optional[_Union[DtypeValue, _Mapping]] = ..., array: _Optional[_Union[Array, _Mapping]] = ..., tuple: _Optional[_Union[ValueList, _Mapping]] = ..., list: _Optional[_Union[ValueList, _Mapping]] = ..., dict: _Optional[_Union[Dict, _Mapping]] = ..., jaxpr: _Optional[int] = ..., closed_jaxpr: _Optional[int] = ..., enum: _Optional[_Union[EnumValue, _Mapping]] = ..., record: _Optional[_Union[Record, _Mapping]] = ..., treedef: _Optional[_Union[TreeDef, _Mapping]] = ..., mesh: _Optional[_Union[Mesh, _Mapping]] = ..., partition_spec: _Optional[_Union[PartitionSpec, _Mapping]] = ..., named_sharding: _Optional[_Union[NamedSharding, _Mapping]] = ..., primitive: _Optional[_Union[PrimitiveRef, _Mapping]] = ..., rule: _Optional[int] = ..., aval: _Optional[int] = ..., frozenset: _Optional[_Union[ValueList, _Mapping]] = ..., big_int: _Optional[str] = ..., extension: _Optional[_Union[Extension, _Mapping]] = ..., singleton: _Optional[str] = ..., symbolic_dim: _Optional[str] = ..., traceback: _Optional[int] = ..., function: _Optional[str] = ...) -> None: ...

class DtypeValue(_message.Message):
    __slots__ = ("dtype", "key_impl", "jnp_scalar_type", "numpy_scalar_type")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    KEY_IMPL_FIELD_NUMBER: _ClassVar[int]
    JNP_SCALAR_TYPE_FIELD_NUMBER: _ClassVar[int]
    NUMPY_SCALAR_TYPE_FIELD_NUMBER: _ClassVar[int]
    dtype: Dtype
    key_impl: str
    jnp_scalar_type: bool
    numpy_scalar_type: bool
    def __init__(self, dtype: _Optional[_Union[Dtype, str]] = ..., key_impl: _Optional[str] = ..., jnp_scalar_type: _Optional[bool] = ..., numpy_scalar_type: _Optional[bool] = ...) -> None: ...

class Extension(_message.Message):
    __slots__ = ("codec", "fields")
    CODEC_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    codec: str
    fields: _containers.RepeatedCompositeFieldContainer[RecordField]
    def __init__(self, codec: _Optional[str] = ..., fields: _Optional[_Iterable[_Union[RecordField, _Mapping]]] = ...) -> None: ...

class CustomRule(_message.Message):
    __slots__ = ("jvp", "vjp", "lin")
    JVP_FIELD_NUMBER: _ClassVar[int]
    VJP_FIELD_NUMBER: _ClassVar[int]
    LIN_FIELD_NUMBER: _ClassVar[int]
    jvp: CustomJvpRule
    vjp: CustomVjpRule
    lin: CustomLinRule
    def __init__(self, jvp: _Optional[_Union[CustomJvpRule, _Mapping]] = ..., vjp: _Optional[_Union[CustomVjpRule, _Mapping]] = ..., lin: _Optional[_Union[CustomLinRule, _Mapping]] = ...) -> None: ...

class CustomLinRule(_message.Message):
    __slots__ = ("name", "bwd", "debug_info")
    NAME_FIELD_NUMBER: _ClassVar[int]
    BWD_FIELD_NUMBER: _ClassVar[int]
    DEBUG_INFO_FIELD_NUMBER: _ClassVar[int]
    name: str
    bwd: int
    debug_info: DebugInfo
    def __init__(self, name: _Optional[str] = ..., bwd: _Optional[int] = ..., debug_info: _Optional[_Union[DebugInfo, _Mapping]] = ...) -> None: ...

class CustomJvpRule(_message.Message):
    __slots__ = ("name", "jvp", "out_zeros", "debug_info", "trace_error")
    NAME_FIELD_NUMBER: _ClassVar[int]
    JVP_FIELD_NUMBER: _ClassVar[int]
    OUT_ZEROS_FIELD_NUMBER: _ClassVar[int]
    DEBUG_INFO_FIELD_NUMBER: _ClassVar[int]
    TRACE_ERROR_FIELD_NUMBER: _ClassVar[int]
    name: str
    jvp: int
    out_zeros: _containers.RepeatedScalarFieldContainer[bool]
    debug_info: DebugInfo
    trace_error: str
    def __init__(self, name: _Optional[str] = ..., jvp: _Optional[int] = ..., out_zeros: _Optional[_Iterable[bool]] = ..., debug_info: _Optional[_Union[DebugInfo, _Mapping]] = ..., trace_error: _Optional[str] = ...) -> None: ...

class CustomVjpRule(_message.Message):
    __slots__ = ("fwd", "bwd", "fwd_name", "bwd_name", "out_tree", "res_tree", "input_fwds", "fwd_debug_info", "bwd_debug_info", "trace_error", "closed_over_inputs")
    FWD_FIELD_NUMBER: _ClassVar[int]
    BWD_FIELD_NUMBER: _ClassVar[int]
    FWD_NAME_FIELD_NUMBER: _ClassVar[int]
    BWD_NAME_FIELD_NUMBER: _ClassVar[int]
    OUT_TREE_FIELD_NUMBER: _ClassVar[int]
    RES_TREE_FIELD_NUMBER: _ClassVar[int]
    INPUT_FWDS_FIELD_NUMBER: _ClassVar[int]
    FWD_DEBUG_INFO_FIELD_NUMBER: _ClassVar[int]
    BWD_DEBUG_INFO_FIELD_NUMBER: _ClassVar[int]
    TRACE_ERROR_FIELD_NUMBER: _ClassVar[int]
    CLOSED_OVER_INPUTS_FIELD_NUMBER: _ClassVar[int]
    fwd: int
    bwd: int
    fwd_name: str
    bwd_name: str
    out_tree: TreeDef
    res_tree: TreeDef
    input_fwds: _containers.RepeatedScalarFieldContainer[int]
    fwd_debug_info: DebugInfo
    bwd_debug_info: DebugInfo
    trace_error: str
    closed_over_inputs: int
    def __init__(self, fwd: _Optional[int] = ..., bwd: _Optional[int] = ..., fwd_name: _Optional[str] = ..., bwd_name: _Optional[str] = ..., out_tree: _Optional[_Union[TreeDef, _Mapping]] = ..., res_tree: _Optional[_Union[TreeDef, _Mapping]] = ..., input_fwds: _Optional[_Iterable[int]] = ..., fwd_debug_info: _Optional[_Union[DebugInfo, _Mapping]] = ..., bwd_debug_info: _Optional[_Union[DebugInfo, _Mapping]] = ..., trace_error: _Optional[str] = ..., closed_over_inputs: _Optional[int] = ...) -> None: ...

class FunctionSignature(_message.Message):
    __slots__ = ("in_tree", "out_tree", "in_avals", "out_avals", "name", "static_leaves")
    IN_TREE_FIELD_NUMBER: _ClassVar[int]
    OUT_TREE_FIELD_NUMBER: _ClassVar[int]
    IN_AVALS_FIELD_NUMBER: _ClassVar[int]
    OUT_AVALS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATIC_LEAVES_FIELD_NUMBER: _ClassVar[int]
    in_tree: TreeDef
    out_tree: TreeDef
    in_avals: _containers.RepeatedScalarFieldContainer[int]
    out_avals: _containers.RepeatedScalarFieldContainer[int]
    name: str
    static_leaves: _containers.RepeatedCompositeFieldContainer[StaticLeaf]
    def __init__(self, in_tree: _Optional[_Union[TreeDef, _Mapping]] = ..., out_tree: _Optional[_Union[TreeDef, _Mapping]] = ..., in_avals: _Optional[_Iterable[int]] = ..., out_avals: _Optional[_Iterable[int]] = ..., name: _Optional[str] = ..., static_leaves: _Optional[_Iterable[_Union[StaticLeaf, _Mapping]]] = ...) -> None: ...

class StaticLeaf(_message.Message):
    __slots__ = ("index", "value")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    index: int
    value: Value
    def __init__(self, index: _Optional[int] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...

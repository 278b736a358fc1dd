"""Which pickle globals are data: the allow-list of the opcode walk.

Each name here is something the frameworks' checkpoints hold as *values* (a tensor rebuilt from
a storage, an ``OrderedDict``, numpy's RNG state, a DCP metadata record), never behaviour. None
of them is ever imported: ``_stubs`` maps each to a stand-in. Anything else (a
``TrainingArguments``, a DeepSpeed ``LossScaler``, ``posix.system``) is named in a
``hash_only`` verdict.
"""

from __future__ import annotations

from typing import Dict

_TORCH_DTYPES = {
    "float32": "float32",
    "float": "float32",
    "float64": "float64",
    "double": "float64",
    "float16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "complex64": "complex64",
    "cfloat": "complex64",
    "complex128": "complex128",
    "cdouble": "complex128",
    "complex32": "complex32",
    "chalf": "complex32",
    "float8_e4m3fn": "float8_e4m3fn",
    "float8_e5m2": "float8_e5m2",
    "float8_e4m3fnuz": "float8_e4m3fnuz",
    "float8_e5m2fnuz": "float8_e5m2fnuz",
    "uint8": "uint8",
    "int8": "int8",
    "int16": "int16",
    "short": "int16",
    "int32": "int32",
    "int": "int32",
    "int64": "int64",
    "long": "int64",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "bool": "bool",
    "quint8": "uint8",
    "qint8": "int8",
    "qint32": "int32",
}
TORCH_DTYPES = {"torch." + k: v for k, v in _TORCH_DTYPES.items()}

# torch.<Kind>Storage -> the dtype of its elements (also torch.cuda.<Kind>Storage, legacy files)
_STORAGES = {
    "Float": "float32",
    "Double": "float64",
    "Half": "float16",
    "BFloat16": "bfloat16",
    "ComplexFloat": "complex64",
    "ComplexDouble": "complex128",
    "Long": "int64",
    "Int": "int32",
    "Short": "int16",
    "Char": "int8",
    "Byte": "uint8",
    "Bool": "bool",
    "QInt8": "int8",
    "QUInt8": "uint8",
    "QInt32": "int32",
    "Untyped": "uint8",
}
STORAGES: Dict[str, str] = {}
for _kind, _dtype in _STORAGES.items():
    STORAGES["torch.%sStorage" % _kind] = _dtype
    STORAGES["torch.cuda.%sStorage" % _kind] = _dtype
STORAGES["torch.storage.UntypedStorage"] = "uint8"

ELEMENT_SIZE = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "complex128": 16,
    "complex64": 8,
    "complex32": 4,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
    "uint8": 1,
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
    "bool": 1,
}

TENSOR_REBUILDERS = frozenset(
    {
        "torch._utils._rebuild_tensor",
        "torch._utils._rebuild_tensor_v2",
        "torch._utils._rebuild_tensor_v3",
        "torch._utils._rebuild_parameter",
        "torch._utils._rebuild_parameter_with_state",
        "torch._tensor._rebuild_from_type_v2",
    }
)
NUMPY_ARRAYS = frozenset(
    {"numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct"}
)
NUMPY_SCALARS = frozenset({"numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar"})
PATHS = frozenset(
    {"pathlib.Path", "pathlib.PosixPath", "pathlib.WindowsPath", "pathlib.PurePosixPath"}
) | {"pathlib.PureWindowsPath"}
DICTS = frozenset(
    {
        "collections.OrderedDict",
        "lightning.fabric.utilities.data.AttributeDict",
        "lightning_fabric.utilities.data.AttributeDict",
        "pytorch_lightning.utilities.parsing.AttributeDict",
        "lightning.pytorch.utilities.parsing.AttributeDict",
    }
)
# Plain records: read as generic objects (their fields), never constructed.
RECORDS = frozenset(
    {
        "argparse.Namespace",
        "numpy.ndarray",
        "numpy.dtype",
        "torch.Size",
        "torch.device",
        "torch.torch_version.TorchVersion",
        "torch.serialization._get_layout",
        "torch.strided",
        "torch.sparse_coo",
        "torch.contiguous_format",
        "torch.channels_last",
        "torch.preserve_format",
        "torch.distributed.checkpoint.filesystem._StorageInfo",
        "numpy.random._pickle.__randomstate_ctor",
        "numpy.random._pickle.__bit_generator_ctor",
        "numpy.random._pickle.__generator_ctor",
        "numpy.random.mtrand.RandomState",
        "numpy.random._mt19937.MT19937",
        "numpy.random._pcg64.PCG64",
        "datetime.datetime",
        "datetime.date",
        "datetime.timedelta",
        "datetime.timezone",
    }
)
RECORD_MODULES = ("torch.distributed.checkpoint.metadata.",)
BUILTINS = frozenset(
    {
        "builtins.set",
        "builtins.frozenset",
        "builtins.complex",
        "builtins.slice",
        "builtins.bytearray",
        "_codecs.encode",
        "copyreg._reconstructor",
        "builtins.object",
    }
)


def is_data(name: str) -> bool:
    """Is ``module.qualname`` a global that only ever holds data?"""
    return (
        name in TORCH_DTYPES
        or name in STORAGES
        or name in TENSOR_REBUILDERS
        or name in NUMPY_ARRAYS
        or name in NUMPY_SCALARS
        or name in PATHS
        or name in DICTS
        or name in RECORDS
        or name in BUILTINS
        or name.startswith(RECORD_MODULES)
    )

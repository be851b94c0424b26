"""The GPU a search compiles for and measures on."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

_KNOWN = {
    # arch: (shared memory per block opt-in, bytes; multiprocessors of the usual part; L2 bytes)
    "sm_90a": (232_448, 132, 50 * 2**20),
    "sm_90": (232_448, 132, 50 * 2**20),
    "sm_89": (101_376, 128, 72 * 2**20),
    "sm_80": (166_912, 108, 40 * 2**20),
    "sm_86": (101_376, 84, 6 * 2**20),
}


@dataclass(frozen=True)
class Target:
    """A compile target plus the device limits the search space needs.

    Attributes:
        arch: CUDA architecture to compile for, e.g. ``"sm_90a"``.
        smem_per_block: largest shared memory one block may use, in bytes.
        num_sms: number of streaming multiprocessors.
        l2_bytes: size of the L2 cache.
        gpu: the device's name, or ``"none"`` for compile-only work.
    """

    arch: str = "sm_90a"
    smem_per_block: int = 232_448
    num_sms: int = 132
    l2_bytes: int = 50 * 2**20
    gpu: str = "none"

    @classmethod
    def from_arch(cls, arch: str, gpu: str = "none") -> Target:
        if arch not in _KNOWN:
            raise ValueError(f"unknown arch {arch!r}; known: {', '.join(sorted(_KNOWN))}")
        smem, sms, l2 = _KNOWN[arch]
        return cls(arch=arch, smem_per_block=smem, num_sms=sms, l2_bytes=l2, gpu=gpu)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Target:
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def tvm(self) -> Any:
        """The TVM target object TileLang compiles for (imports TileLang)."""
        import tilelang  # noqa: F401  (TileLang must be imported before its bundled TVM)
        import tvm

        return tvm.target.Target({"kind": "cuda", "arch": self.arch})


def compile_arch(major: int, minor: int) -> str:
    """The arch tilesearch compiles for on a GPU of compute capability ``major.minor``: ``sm_90a``
    on Hopper (its wgmma and TMA instructions need the arch-specific target), else ``sm_XY``."""
    return f"sm_{major}{minor}" + ("a" if (major, minor) == (9, 0) else "")


def detect() -> Target:
    """The target of CUDA device 0, read through PyTorch. Raises RuntimeError without a GPU."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA GPU is visible")
    props = torch.cuda.get_device_properties(0)
    arch = compile_arch(props.major, props.minor)
    smem = getattr(props, "shared_memory_per_block_optin", 0) or _KNOWN.get(arch, (49_152,))[0]
    return Target(
        arch=arch,
        smem_per_block=int(smem),
        num_sms=int(props.multi_processor_count),
        l2_bytes=int(getattr(props, "L2_cache_size", 50 * 2**20)),
        gpu=props.name,
    )

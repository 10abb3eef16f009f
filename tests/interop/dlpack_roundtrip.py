#!/usr/bin/env python3
# DLPack round trips between fusion and PyTorch / CuPy on the GPU machine, through the small bridge library
# (tests/interop/dlpack_bridge.cpp) and ctypes: torch's and CuPy's tensors doubled in place by fusion (zero
# copy: the change is seen by the owner), and fusion's arrays read by torch and CuPy.
#   python3 tests/interop/dlpack_roundtrip.py build-gpu/tests/libfusion_dlpack_bridge.so
import ctypes
import faulthandler
import sys

faulthandler.enable()
lib = ctypes.CDLL(sys.argv[1])
lib.fz_bridge_error.restype = ctypes.c_char_p
lib.fz_bridge_double_in_place.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
lib.fz_bridge_add_one_by_pointer.argtypes = [ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p]
lib.fz_bridge_export_halves.restype = ctypes.c_void_p
lib.fz_bridge_export_halves.argtypes = [ctypes.c_longlong, ctypes.c_int, ctypes.c_void_p]
api = ctypes.pythonapi
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_GetName.restype = ctypes.c_char_p
api.PyCapsule_GetName.argtypes = [ctypes.py_object]
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
failures = 0


def check(name, ok):
    global failures
    print(f"{name}: {'ok' if ok else 'FAILED'}", flush=True)
    failures += 0 if ok else 1


def give_to_fusion(capsule, stream):
    """fusion takes the tensor: the capsule is marked used, so its producer does not free it too.
    A "dltensor_versioned" capsule (DLPack 1.x) holds a DLManagedTensorVersioned, "dltensor" the legacy one."""
    name = api.PyCapsule_GetName(capsule)
    versioned = 1 if name == b"dltensor_versioned" else 0
    ptr = api.PyCapsule_GetPointer(capsule, name)
    api.PyCapsule_SetName(capsule, b"used_dltensor_versioned" if versioned else b"used_dltensor")
    if lib.fz_bridge_double_in_place(ptr, versioned, stream) != 0:
        raise RuntimeError(lib.fz_bridge_error().decode())


def from_fusion(n, stream):
    ptr = lib.fz_bridge_export_halves(n, 0, stream)
    if not ptr:
        raise RuntimeError(lib.fz_bridge_error().decode())
    return api.PyCapsule_New(ptr, b"dltensor", None)


import torch  # noqa: E402
import torch.utils.dlpack  # noqa: E402

t = torch.arange(1000, dtype=torch.float32, device="cuda") + 1
stream = torch.cuda.current_stream().cuda_stream
give_to_fusion(torch.utils.dlpack.to_dlpack(t), stream)
torch.cuda.synchronize()
check("torch tensor doubled in place by fusion", torch.equal(t.cpu(), (torch.arange(1000, dtype=torch.float32) + 1) * 2))
strided = torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4).t()
give_to_fusion(torch.utils.dlpack.to_dlpack(strided), stream)
torch.cuda.synchronize()
check("a transposed torch view doubled through its strides",
      torch.equal(strided.cpu(), torch.arange(12, dtype=torch.float32).reshape(3, 4).t() * 2))
try:  # DLPack 1.x from torch, where this torch has it
    v = torch.arange(10, dtype=torch.float32, device="cuda")
    give_to_fusion(v.__dlpack__(max_version=(1, 0)), None)
    check("torch tensor through a versioned capsule", torch.equal(v.cpu(), torch.arange(10, dtype=torch.float32) * 2))
except TypeError:
    print("this torch has no versioned DLPack export", flush=True)
# by pointer (fz::from_device), on torch's own stream
w = torch.arange(100, dtype=torch.float32, device="cuda")
if lib.fz_bridge_add_one_by_pointer(w.data_ptr(), w.numel(), stream) != 0:
    raise RuntimeError(lib.fz_bridge_error().decode())
check("torch tensor by pointer, written on torch's stream", torch.equal(w.cpu(), torch.arange(100, dtype=torch.float32) + 1))
u = torch.utils.dlpack.from_dlpack(from_fusion(1000, stream))
check("fusion array read by torch", torch.equal(u.cpu(), torch.arange(1000, dtype=torch.float32) * 0.5))
del u

import cupy  # noqa: E402

c = cupy.arange(1000, dtype=cupy.float32) + 1
cstream = cupy.cuda.get_current_stream().ptr
# the DLPack 1.x protocol where this CuPy has it (a versioned capsule), else its legacy export
try:
    capsule = c.__dlpack__(stream=None, max_version=(1, 0))
except TypeError:
    capsule = c.toDlpack()
print("cupy's capsule:", api.PyCapsule_GetName(capsule).decode(), flush=True)
give_to_fusion(capsule, cstream)
cupy.cuda.Device().synchronize()
check("cupy array doubled in place by fusion", bool((c.get() == (cupy.arange(1000, dtype=cupy.float32).get() + 1) * 2).all()))
g = cupy.arange(100, dtype=cupy.float32)
if lib.fz_bridge_add_one_by_pointer(g.data.ptr, g.size, cstream) != 0:
    raise RuntimeError(lib.fz_bridge_error().decode())
check("cupy array by pointer, written on cupy's stream", bool((g.get() == cupy.arange(100, dtype=cupy.float32).get() + 1).all()))
capsule = from_fusion(1000, cstream)
d = cupy.from_dlpack(capsule) if hasattr(cupy, "from_dlpack") else cupy.fromDlpack(capsule)
check("fusion array read by cupy", bool((d.get() == cupy.arange(1000, dtype=cupy.float32).get() * 0.5).all()))
print("dlpack round trips:", "all ok" if failures == 0 else f"{failures} FAILED")
sys.exit(1 if failures else 0)

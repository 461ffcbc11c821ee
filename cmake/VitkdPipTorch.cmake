# A LibTorch from a pip wheel: CMAKE_PREFIX_PATH holds
# <site-packages>/torch/share/cmake (what torch.utils.cmake_prefix_path
# prints). What a build against it needs is derived here, before
# find_package(Torch), so that that prefix and -DVITKD_WITH_CUDA=ON are
# enough (docs/building.md):
#  * the torch folder itself on CMAKE_PREFIX_PATH: TorchConfig.cmake looks
#    for libtorch on the system paths before its own prefix, and with
#    Debian's libtorch-dev installed would mix 2.x headers with 1.13
#    libraries (the check after find_package(Torch) stops such a build);
#  * TORCH_CUDA_ARCH_LIST (default 9.0, Hopper): without it the Torch
#    package probes for GPUs with a try_run that CMake 3.25 cannot compile
#    (CUDA in C++20); vitkd compiles no CUDA code, so the list does not
#    change what is built;
#  * NCCL_ROOT at the wheel's NCCL (<site-packages>/nvidia/nccl): the one
#    LibTorch was built against; an older NCCL (the CUDA toolkit's) fails
#    at the link (ncclCommResume, ncclCommGrow, ... undefined).
# Each is left alone where the user set it. Sets VITKD_PIP_TORCH (the torch
# folder, or empty) and VITKD_PIP_TORCH_NCCL (the wheel's NCCL folder, or
# empty: cmake/backends/nccl.cmake stops a build that would link another NCCL).
set(VITKD_PIP_TORCH "")
set(VITKD_PIP_TORCH_NCCL "")
foreach(_entry IN LISTS CMAKE_PREFIX_PATH)
  # (CMAKE_MATCH_1 is read in a second if(): arguments expand before the match.)
  if(_entry MATCHES "^(.*)/torch/share/cmake/?$")
    set(_site "${CMAKE_MATCH_1}")
    if(EXISTS "${_site}/torch/share/cmake/Torch/TorchConfig.cmake")
      set(VITKD_PIP_TORCH "${_site}/torch")
      break()
    endif()
  endif()
endforeach()
if(VITKD_PIP_TORCH)
  set(_derived "")
  if(NOT "${VITKD_PIP_TORCH}" IN_LIST CMAKE_PREFIX_PATH)
    list(APPEND CMAKE_PREFIX_PATH "${VITKD_PIP_TORCH}")
    list(APPEND _derived "CMAKE_PREFIX_PATH += ${VITKD_PIP_TORCH}")
  endif()
  if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    set(TORCH_CUDA_ARCH_LIST "9.0")
    set(ENV{TORCH_CUDA_ARCH_LIST} "9.0")
    list(APPEND _derived "TORCH_CUDA_ARCH_LIST=9.0")
  endif()
  if(EXISTS "${_site}/nvidia/nccl/include/nccl.h")
    set(VITKD_PIP_TORCH_NCCL "${_site}/nvidia/nccl")
    if(NOT NCCL_ROOT AND NOT DEFINED ENV{NCCL_ROOT})
      set(NCCL_ROOT "${VITKD_PIP_TORCH_NCCL}")
      list(APPEND _derived "NCCL_ROOT=${NCCL_ROOT}")
    endif()
  endif()
  if(_derived)
    string(REPLACE ";" ", " _derived "${_derived}")
    message(STATUS "LibTorch from a pip wheel (${VITKD_PIP_TORCH}): derived ${_derived}")
  endif()
endif()

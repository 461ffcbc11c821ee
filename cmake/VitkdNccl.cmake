# Decides what vitkd builds for GPUs:
#  * VITKD_HAVE_CUDART: the CUDA runtime calls of src/comm/cuda_runtime.cpp
#    (device count, device choice), when the CUDA toolkit is found
#    (VITKD_WITH_CUDA = AUTO | ON | OFF);
#  * VITKD_HAVE_NCCL: the NCCL backend, target vitkd::nccl (NCCL + CUDA
#    runtime) (VITKD_WITH_NCCL = AUTO | ON | OFF);
#  * VITKD_TORCH_CUDA: whether the LibTorch found has CUDA (decided in the
#    top-level CMakeLists.txt from the Torch package).
set(VITKD_HAVE_NCCL FALSE)
set(VITKD_HAVE_CUDART FALSE)
string(TOUPPER "${VITKD_WITH_CUDA}" _cuda_mode)
if(NOT _cuda_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "VITKD_WITH_CUDA must be AUTO, ON or OFF, not '${VITKD_WITH_CUDA}'")
endif()
if(NOT _cuda_mode STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(VITKD_HAVE_CUDART TRUE)
    message(STATUS "CUDA runtime: ${CUDAToolkit_VERSION} (${CUDAToolkit_LIBRARY_DIR})")
  elseif(_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "VITKD_WITH_CUDA=ON but the CUDA toolkit was not found; set CUDAToolkit_ROOT")
  else()
    message(STATUS "CUDA runtime: not found (run.device = \"cuda\" will be refused)")
  endif()
endif()
string(TOUPPER "${VITKD_WITH_NCCL}" _nccl_mode)
if(NOT _nccl_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "VITKD_WITH_NCCL must be AUTO, ON or OFF, not '${VITKD_WITH_NCCL}'")
endif()
if(_nccl_mode STREQUAL "OFF")
  return()
endif()
find_path(VITKD_NCCL_INCLUDE_DIR nccl.h
  HINTS ${NCCL_ROOT}/include $ENV{NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS}
        /usr/local/cuda/include)
# NAMES libnccl.so.2: the nvidia-nccl wheel (PyPI) ships no libnccl.so link.
find_library(VITKD_NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR
  HINTS ${NCCL_ROOT}/lib $ENV{NCCL_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR}
        /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib)

# A pip wheel's LibTorch (cmake/VitkdPipTorch.cmake) was built against the
# wheel's NCCL; another (older) one fails at the link, symbol by symbol.
if(VITKD_PIP_TORCH_NCCL AND VITKD_NCCL_LIBRARY)
  file(REAL_PATH "${VITKD_NCCL_LIBRARY}" _nccl_real)
  file(REAL_PATH "${VITKD_PIP_TORCH_NCCL}" _wheel_real)
  string(FIND "${_nccl_real}" "${_wheel_real}/" _at)
  if(NOT _at EQUAL 0)
    message(FATAL_ERROR "LibTorch from the pip wheel at ${VITKD_PIP_TORCH} links the wheel's NCCL "
      "(${VITKD_PIP_TORCH_NCCL}), but NCCL_ROOT gave ${VITKD_NCCL_LIBRARY}: set -DNCCL_ROOT=${VITKD_PIP_TORCH_NCCL} "
      "(or leave NCCL_ROOT unset), in a fresh build folder")
  endif()
endif()
if(VITKD_HAVE_CUDART AND VITKD_NCCL_INCLUDE_DIR AND VITKD_NCCL_LIBRARY)
  set(VITKD_HAVE_NCCL TRUE)
  add_library(vitkd::nccl INTERFACE IMPORTED)
  set_target_properties(vitkd::nccl PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${VITKD_NCCL_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${VITKD_NCCL_LIBRARY};CUDA::cudart")
  message(STATUS "NCCL backend: enabled (${VITKD_NCCL_LIBRARY}, CUDA ${CUDAToolkit_VERSION})")
elseif(_nccl_mode STREQUAL "ON")
  message(FATAL_ERROR "VITKD_WITH_NCCL=ON but CUDA (${CUDAToolkit_FOUND}) or NCCL "
    "(nccl.h: ${VITKD_NCCL_INCLUDE_DIR}, libnccl: ${VITKD_NCCL_LIBRARY}) was not found. "
    "Set CUDAToolkit_ROOT and NCCL_ROOT, or use -DVITKD_WITH_NCCL=OFF.")
else()
  message(STATUS "NCCL backend: disabled (CUDA or NCCL not found)")
endif()

# The NCCL backend (src/comm/nccl_backend.cpp), VITKD_WITH_NCCL = AUTO | ON |
# OFF. A backend module (read by the top-level CMakeLists.txt for the file
# src/comm/<word>_backend.cpp) sets VITKD_BACKEND_ENABLED and, when enabled,
# VITKD_BACKEND_LIBS (what the backend's file links). This one also sets
# VITKD_HAVE_NCCL (read by tests/gpu).
set(VITKD_HAVE_NCCL FALSE)
set(VITKD_BACKEND_ENABLED FALSE)
string(TOUPPER "${VITKD_WITH_NCCL}" _nccl_mode)
if(NOT _nccl_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "VITKD_WITH_NCCL must be AUTO, ON or OFF, not '${VITKD_WITH_NCCL}'")
endif()
if(_nccl_mode STREQUAL "OFF")
  message(STATUS "NCCL backend: disabled (VITKD_WITH_NCCL=OFF)")
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
  set(VITKD_BACKEND_ENABLED TRUE)
  set(VITKD_BACKEND_LIBS vitkd::nccl)
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

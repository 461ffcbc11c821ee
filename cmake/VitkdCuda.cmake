# Decides what vitkd builds for GPUs, apart from the backends
# (cmake/backends/):
#  * VITKD_HAVE_CUDART: the CUDA runtime calls of src/comm/cuda_runtime.cpp
#    (device count, device choice), when the CUDA toolkit is found
#    (VITKD_WITH_CUDA = AUTO | ON | OFF);
#  * VITKD_TORCH_CUDA: whether the LibTorch found has CUDA (decided in the
#    top-level CMakeLists.txt from the Torch package).
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

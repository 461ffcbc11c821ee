# FindKokkos: provides the imported target Kokkos::kokkos.
#
# 1. A working Kokkos CMake package (Spack's, or a source build) is used as is.
# 2. Debian's Kokkos ships inside Trilinos (libtrilinos-kokkos-dev). Its
#    KokkosConfig.cmake points Kokkos::kokkos at <prefix>/include, which does
#    not hold the headers (they live in /usr/include/trilinos). In that case the
#    include path is repaired, or the target is built from scratch from the
#    headers and libtrilinos_kokkoscore.
include(FindPackageHandleStandardArgs)

# separable_compilation: only the sources vitkd names go to Kokkos's device
# compiler where Kokkos has CUDA (without it, Kokkos would redirect every
# source of every target that links it).
find_package(Kokkos CONFIG QUIET OPTIONAL_COMPONENTS separable_compilation)

find_path(VITKD_KOKKOS_INCLUDE_DIR Kokkos_Core.hpp
  HINTS ${Kokkos_DIR}/../../../include ${Kokkos_ROOT}/include
  PATH_SUFFIXES trilinos kokkos)

function(_vitkd_kokkos_target_ok out)
  set(ok FALSE)
  if(TARGET Kokkos::kokkos)
    get_target_property(dirs Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
    if(NOT dirs)
      set(dirs "")
    endif()
    foreach(d IN LISTS dirs)
      if(EXISTS "${d}/Kokkos_Core.hpp")
        set(ok TRUE)
      endif()
    endforeach()
    # Kokkos' own config may carry the headers through a linked target instead.
    if(NOT ok)
      get_target_property(libs Kokkos::kokkos INTERFACE_LINK_LIBRARIES)
      foreach(l IN LISTS libs)
        if(TARGET ${l})
          get_target_property(ldirs ${l} INTERFACE_INCLUDE_DIRECTORIES)
          foreach(d IN LISTS ldirs)
            if(EXISTS "${d}/Kokkos_Core.hpp")
              set(ok TRUE)
            endif()
          endforeach()
        endif()
      endforeach()
    endif()
  endif()
  set(${out} ${ok} PARENT_SCOPE)
endfunction()

_vitkd_kokkos_target_ok(_kokkos_ok)
if(_kokkos_ok)
  set(Kokkos_FOUND TRUE)
  message(STATUS "Kokkos: using the Kokkos CMake package in ${Kokkos_DIR} (${Kokkos_VERSION}, devices: ${Kokkos_DEVICES})")
  # A Kokkos with CUDA: AdamW's device kernels (src/optim/adamw_kernels.cpp).
  if("CUDA" IN_LIST Kokkos_DEVICES)
    set(VITKD_KOKKOS_CUDA ON)
  endif()
  find_package_handle_standard_args(Kokkos DEFAULT_MSG Kokkos_FOUND)
  return()
endif()

find_library(VITKD_KOKKOS_CORE_LIBRARY NAMES kokkoscore trilinos_kokkoscore)
find_package_handle_standard_args(Kokkos
  REQUIRED_VARS VITKD_KOKKOS_INCLUDE_DIR VITKD_KOKKOS_CORE_LIBRARY
  FAIL_MESSAGE "Kokkos not found: on Debian install libtrilinos-kokkos-dev, with Spack add kokkos, or set Kokkos_ROOT")

if(Kokkos_FOUND)
  if(TARGET Kokkos::kokkos)
    # Debian/Trilinos: the target exists but its include path is wrong.
    message(STATUS "Kokkos: repairing the include path of Trilinos' Kokkos::kokkos -> ${VITKD_KOKKOS_INCLUDE_DIR}")
    set_target_properties(Kokkos::kokkos PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${VITKD_KOKKOS_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES "${VITKD_KOKKOS_CORE_LIBRARY};dl")
  else()
    message(STATUS "Kokkos: building Kokkos::kokkos from ${VITKD_KOKKOS_INCLUDE_DIR} and ${VITKD_KOKKOS_CORE_LIBRARY}")
    add_library(Kokkos::kokkos INTERFACE IMPORTED)
    set_target_properties(Kokkos::kokkos PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${VITKD_KOKKOS_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES "${VITKD_KOKKOS_CORE_LIBRARY};dl")
  endif()
endif()

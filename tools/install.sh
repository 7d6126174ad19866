#!/usr/bin/env bash
# Installs tapegrad as a C library (//:install; docs/install.md):
#   ./bazelw run //:install -- --prefix=$HOME/.local      (default prefix: /usr/local)
#   PREFIX/lib/libtapegrad.so.0 (+ libtapegrad.so), PREFIX/lib/libtapegrad.a,
#   PREFIX/include/tapegrad/ (tapegrad.h and the headers it includes),
#   PREFIX/lib/pkgconfig/tapegrad.pc (shared), tapegrad-static.pc (libtapegrad.a),
#   PREFIX/lib/cmake/tapegrad/tapegradConfig*.cmake,
#   and data-parallel training (distributed/, docs/distributed.md): PREFIX/lib/libtapegrad_dist.a,
#   PREFIX/include/tapegrad/distributed/*.h, PREFIX/lib/pkgconfig/tapegrad-dist.pc.
# Then: cc main.c $(pkg-config --cflags --libs tapegrad), or in CMake
#   find_package(tapegrad REQUIRED) + target_link_libraries(app tapegrad::tapegrad).
set -euo pipefail

VERSION=0.1.0
prefix=/usr/local
while [[ $# -gt 0 ]]; do
  case $1 in
    --prefix=*) prefix=${1#--prefix=} ;;
    --prefix) [[ $# -ge 2 ]] || { echo "install: --prefix needs a folder" >&2; exit 2; }; prefix=$2; shift ;;
    -h | --help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install: unknown argument '$1' (--prefix=DIR)" >&2; exit 2 ;;
  esac
  shift
done
# `bazel run` runs in the runfiles; a relative prefix is the caller's.
if [[ $prefix != /* ]]; then prefix="${BUILD_WORKING_DIRECTORY:-$PWD}/$prefix"; fi

# The files: the runfiles of this script (bazel run, bazel-bin/install or a test's data).
here=""
for d in "${RUNFILES_DIR:-}/tapegrad" "$0.runfiles/tapegrad" "$PWD"; do
  if [[ -f $d/public_headers.txt ]]; then here=$d; break; fi
done
[[ -n $here ]] || { echo "install: cannot find the built files (run it with ./bazelw run //:install)" >&2; exit 1; }

# cp + chmod, not install(1): this script is itself called "install" in Bazel's runfiles.
put() { cp -f "$2" "$3" && chmod "$1" "$3"; }
libdir=$prefix/lib includedir=$prefix/include
mkdir -p "$libdir/pkgconfig" "$libdir/cmake/tapegrad" "$includedir/tapegrad"
put 755 "$here/libtapegrad.so" "$libdir/libtapegrad.so.0"
ln -sf libtapegrad.so.0 "$libdir/libtapegrad.so"
put 644 "$here/libtapegrad.a" "$libdir/libtapegrad.a"
while read -r h; do
  [[ -n $h ]] || continue
  mkdir -p "$includedir/tapegrad/$(dirname "$h")"
  put 644 "$here/$h" "$includedir/tapegrad/$h"
done <"$here/public_headers.txt"

# What the static archive needs besides itself (the shared library records it).
# OpenBLAS is not linked: the library loads it at start-up (ops/cpu/blas.c, docs/design.md).
private_libs="-ldl -lz -lcjson -lpng -ljpeg -lm -lpthread"
cat >"$libdir/pkgconfig/tapegrad.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: tapegrad
Description: A small PyTorch in C: tensors, reverse-mode autograd, nn modules, optimizers
Version: $VERSION
Cflags: -I\${includedir}/tapegrad
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -ltapegrad
Libs.private: $private_libs
PC

# Static: the archive by its path (with -ltapegrad, `pkg-config --static` gave, the linker
# takes libtapegrad.so beside it), then what it needs. The system libraries stay shared:
# Debian's libcjson-dev has no static archive, so `cc -static` cannot link cJSON.
cat >"$libdir/pkgconfig/tapegrad-static.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: tapegrad-static
Description: tapegrad linked statically (libtapegrad.a; the system libraries shared)
Version: $VERSION
Cflags: -I\${includedir}/tapegrad
Libs: \${libdir}/libtapegrad.a $private_libs
PC

cat >"$libdir/cmake/tapegrad/tapegradConfig.cmake" <<'CMAKE'
# tapegrad's CMake package: find_package(tapegrad REQUIRED), then
#   target_link_libraries(app PRIVATE tapegrad::tapegrad)          (shared)
#   target_link_libraries(app PRIVATE tapegrad::tapegrad_static)   (static)
get_filename_component(_tapegrad_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET tapegrad::tapegrad)
  add_library(tapegrad::tapegrad SHARED IMPORTED)
  set_target_properties(tapegrad::tapegrad PROPERTIES
    IMPORTED_LOCATION "${_tapegrad_prefix}/lib/libtapegrad.so.0"
    IMPORTED_SONAME "libtapegrad.so.0"
    INTERFACE_INCLUDE_DIRECTORIES "${_tapegrad_prefix}/include/tapegrad")
  add_library(tapegrad::tapegrad_static STATIC IMPORTED)
  set_target_properties(tapegrad::tapegrad_static PROPERTIES
    IMPORTED_LOCATION "${_tapegrad_prefix}/lib/libtapegrad.a"
    INTERFACE_INCLUDE_DIRECTORIES "${_tapegrad_prefix}/include/tapegrad"
    INTERFACE_LINK_LIBRARIES "dl;z;cjson;png;jpeg;m;pthread")
endif()
set(tapegrad_INCLUDE_DIRS "${_tapegrad_prefix}/include/tapegrad")
set(tapegrad_LIBRARIES tapegrad::tapegrad)
set(tapegrad_FOUND TRUE)
CMAKE

cat >"$libdir/cmake/tapegrad/tapegradConfigVersion.cmake" <<CMAKE
set(PACKAGE_VERSION "$VERSION")
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION OR NOT PACKAGE_FIND_VERSION_MAJOR EQUAL 0)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
CMAKE

# Data-parallel training: a static library that uses the library's internal functions, so
# it links with libtapegrad.a (whose internal symbols the shared library hides), and MPI.
# CPU tensors only (MPI): a CUDA build's NCCL objects are not in it.
if [[ -f $here/distributed/libtapegrad_dist.a ]]; then
  put 644 "$here/distributed/libtapegrad_dist.a" "$libdir/libtapegrad_dist.a"
  mkdir -p "$includedir/tapegrad/distributed"
  for h in dist.h ddp.h sync_batch_norm.h; do put 644 "$here/distributed/$h" "$includedir/tapegrad/distributed/$h"; done
  cat >"$libdir/pkgconfig/tapegrad-dist.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: tapegrad-dist
Description: tapegrad's data-parallel training over MPI (collectives, DDP, SyncBatchNorm); links libtapegrad statically
Version: $VERSION
Cflags: -I\${includedir}/tapegrad
Libs: -L\${libdir} -ltapegrad_dist \${libdir}/libtapegrad.a -lmpi $private_libs
PC
fi

echo "installed tapegrad $VERSION to $prefix"
echo "  cc main.c \$(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --cflags --libs tapegrad)"
echo "  cc main.c \$(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --cflags --libs tapegrad-static)   (static)"
echo "  cmake -DCMAKE_PREFIX_PATH=$prefix ...   (find_package(tapegrad))"
echo "  cc main.c \$(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --cflags --libs tapegrad-dist)   (MPI programs)"

#!/usr/bin/env bash
# Installing and packaging: `cmake --install` into a staging DESTDIR puts the tools (each with the
# library linked in), the man pages and the bash completions in their places, and the installed
# tools run from there (no library of ours to find, no LD_LIBRARY_PATH); `cpack -G DEB` makes a .deb
# whose dependencies are Debian's runtime packages, whose contents are the same files, and whose
# tools run when unpacked. With HDF5 linked statically (ATTN_STATIC_HDF5, the serial build's
# default) no tool loads the shared HDF5 or the 30-odd libraries behind it.
source "$(dirname "$0")/lib.sh"
: "${BUILD:?}" "${SRC:?}"
tools="tensor-gen pe-gen attn-score mha-run encode decode attn-view quantize"
unset LD_LIBRARY_PATH
static_hdf5=$(sed -n 's/^ATTN_STATIC_HDF5:BOOL=//p' "$BUILD/CMakeCache.txt")
[ -n "$static_hdf5" ] && pass || fail "ATTN_STATIC_HDF5 not in $BUILD/CMakeCache.txt"

# --- cmake --install with DESTDIR ------------------------------------------------------------
DESTDIR="$WORK/stage" cmake --install "$BUILD" --prefix /opt/attn >install.log 2>&1 && pass ||
  fail "cmake --install: $(tail -3 install.log)"
root="$WORK/stage/opt/attn"
for t in $tools; do
  [ -x "$root/bin/$t" ] && pass || fail "bin/$t not installed"
  [ -f "$root/share/man/man1/$t.1" ] && pass || fail "man1/$t.1 not installed"
  [ -f "$root/share/bash-completion/completions/$t" ] && pass || fail "completion for $t not installed"
done
[ -f "$root/share/man/man7/attn-toolkit.7" ] && pass || fail "man7/attn-toolkit.7 not installed"
[ -z "$(find "$root" -name 'libattn*' -o -name '*.so*' -o -name '*.a' -o -name '*.h' -o -name '*.hpp')" ] && pass ||
  fail "libraries or headers installed: $(find "$root" -name 'lib*' -o -name '*.h*')"
for t in $tools; do
  needed=$(readelf -d "$root/bin/$t" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  # The tools never look in the build tree, and never for a library of ours.
  readelf -d "$root/bin/$t" | grep -qiE "rpath|runpath" && fail "$t has a RUNPATH: $(readelf -d "$root/bin/$t" | grep -i path)" || pass
  grep -q "attn" <<<"$needed" && fail "$t needs a library of ours: $needed" || pass
  if [ "$static_hdf5" = ON ]; then
    grep -qE "libhdf5|libcurl|libcrypto" <<<"$needed" && fail "$t loads HDF5's shared library or its S3 stack: $needed" || pass
  else
    grep -q "libhdf5" <<<"$needed" && pass || fail "$t does not load libhdf5 (ATTN_STATIC_HDF5=OFF): $needed"
  fi
done
"$root/bin/tensor-gen" --shape 1,4,8 --fill arange -o - | "$root/bin/pe-gen" --add - -o - |
  "$root/bin/attn-view" -: --stats >out.txt 2>err.txt && grep -q "^tensor  *standard input:/output float32 (1, 4, 8)" out.txt &&
  pass || fail "installed tools in a pipe: $(cat err.txt out.txt)"
"$root/bin/attn-view" --version | grep -q "^attn-view [0-9]" && pass || fail "installed --version"
groff -man -ww -z "$root/share/man/man7/attn-toolkit.7" 2>&1 | grep -q . && fail "installed man page warns" || pass
# The installed completion works for the installed tools.
PATH="$root/bin:$PATH" bash -c "source '$root/share/bash-completion/completions/pe-gen'
  COMP_WORDS=(pe-gen --kind ''); COMP_CWORD=2; _attn_toolkit pe-gen; echo \${COMPREPLY[*]}" >out.txt 2>&1
[ "$(cat out.txt)" = "sinusoidal learned rope alibi relative" ] && pass || fail "installed completion: $(cat out.txt)"

# --- cpack -G DEB ----------------------------------------------------------------------------
cpack --config "$BUILD/CPackConfig.cmake" -G DEB -B "$WORK/pkg" >cpack.log 2>&1 && pass || fail "cpack: $(tail -5 cpack.log)"
deb=$(ls "$WORK"/pkg/attn-toolkit_*_*.deb 2>/dev/null | head -1)
[ -f "$deb" ] && pass || fail "no .deb produced: $(ls "$WORK/pkg")"
dpkg-deb --info "$deb" >info.txt
grep -q "^ Package: attn-toolkit$" info.txt && grep -q "^ Version: [0-9.]*$" info.txt && pass || fail "control: $(cat info.txt)"
depends=$(sed -n 's/^ Depends: //p' info.txt)
hdf5_packages=libhdf5
[ "$static_hdf5" = ON ] && hdf5_packages="libsz2 zlib1g"
for p in $hdf5_packages libopenblas libfmt libpng16 libgomp1 libstdc++6 libc6; do
  grep -q "$p" <<<"$depends" && pass || fail "Depends lacks $p: $depends"
done
if [ "$static_hdf5" = ON ]; then
  grep -q "libhdf5" <<<"$depends" && fail "Depends names HDF5, which is linked in: $depends" || pass
fi
grep -q -- "-dev" <<<"$depends" && fail "Depends names a -dev package: $depends" || pass
# Every dependency is a package this Debian knows.
for p in $(tr ',' '\n' <<<"$depends" | sed 's/(.*//; s/|.*//' | tr -d ' '); do
  apt-cache show "$p" >/dev/null 2>&1 && pass || fail "Depends names '$p', which is not a Debian package"
done
dpkg-deb --contents "$deb" | awk '{print $6}' >contents.txt
for t in $tools; do
  grep -qx "./usr/bin/$t" contents.txt && grep -qx "./usr/share/man/man1/$t.1" contents.txt &&
    grep -qx "./usr/share/bash-completion/completions/$t" contents.txt && pass || fail "$t missing from the .deb"
done
grep -qx "./usr/share/man/man7/attn-toolkit.7" contents.txt && pass || fail ".deb lacks the man7 page: $(cat contents.txt)"
grep -qE "/lib[^/]*\.(so|a)" contents.txt && fail ".deb holds a library: $(grep lib contents.txt)" || pass
dpkg-deb -x "$deb" unpacked && "$PWD/unpacked/usr/bin/pe-gen" --len 4 --dim 6 -o pe.h5 && [ "$(shape pe.h5 pe)" = "4, 6" ] &&
  pass || fail "the unpacked .deb's pe-gen does not run"

finish

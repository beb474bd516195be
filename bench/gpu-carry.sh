#!/usr/bin/env bash
# gpu-carry.sh - prepares .carry/ (git-ignored) for a device call: a
# Release build with SASS for sm_90 only, the binaries bench/gpu-check.sh
# runs copied into .carry/build/ (build-tree layout, debug info stripped),
# and the shared libraries they need from this machine in .carry/lib/ --
# except glibc and the CUDA libraries (cudart, cuBLAS, cuBLASLt), which the
# device image has (gpu-check.sh finds them there).  Prints the sizes (the
# device tool carries 64 MiB at most).
#   bash bench/gpu-carry.sh            then, on the device:
#   run(command="bash bench/gpu-check.sh", carry=[".carry"], timeout_s=600)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="$ROOT/build-carry"
C="$ROOT/.carry"
cmake -S "$ROOT" -B "$B" -DSLUICE_CUDA=ON -DSLUICE_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$B" -j2 --target sluice-worker sluice-model bench-gpu bench-gpu-serve \
	test_worker_cuda_probe test_worker_cuda_backend >/dev/null
rm -rf "$C/build" "$C/lib"
mkdir -p "$C/lib"
for f in tools/sluice-model worker/sluice-worker bench/bench-gpu bench/bench-gpu-serve \
	 tests/worker/test_worker_cuda_probe tests/worker/test_worker_cuda_backend; do
	mkdir -p "$C/build/$(dirname "$f")"
	cp "$B/$f" "$C/build/$f"
	strip --strip-debug "$C/build/$f"
	ldd "$B/$f" | awk '$3 ~ /^\// { print $3 }' | while read -r lib; do
		case "$(basename "$lib")" in
		libc.so*|libstdc++*|libgcc_s*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libcuda.so*|libcudart.so*|libcublas*) ;;
		*) cp -L "$lib" "$C/lib/" ;;
		esac
	done
done
du -sh "$C/build" "$C/lib"
ls "$C/lib"

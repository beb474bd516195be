/*
 * check.cuh - the one checked-call macro of the CUDA backend.
 *
 * WK_CU(call) evaluates a CUDA runtime, cuBLAS or cuBLASLt call; on failure
 * it logs one "cuda_error" record naming the call, the file and the line and
 * the library's error string, then makes the enclosing function return
 * CM_EIO.  Nothing aborts: the backend reports the error up to the worker,
 * which fails the step (and exits on a device fault), so the gateway sees
 * the worker go down.  Use only in functions returning enum cm_status.
 * Thread: any.
 */
#ifndef SLUICE_WORKER_CUDA_CHECK_CUH
#define SLUICE_WORKER_CUDA_CHECK_CUH

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "common/status.h"

/* NULL when the status is success, else the library's description. */
const char *wk_cuda_err_str(cudaError_t e);
const char *wk_cuda_err_str(cublasStatus_t e);

/* Logs the failed call (event "cuda_error"). */
void wk_cuda_report(const char *call, const char *file, int line, const char *what);

#define WK_CU(call)                                                          \
	do {                                                                 \
		const char *wk_cu_e_ = wk_cuda_err_str(call);                \
		if (wk_cu_e_) {                                              \
			wk_cuda_report(#call, __FILE__, __LINE__, wk_cu_e_); \
			return CM_EIO;                                       \
		}                                                            \
	} while (0)

/* Checks the last kernel launch. */
#define WK_CU_LAUNCH() WK_CU(cudaGetLastError())

#endif

/*
 * check.cu - see check.cuh: error strings and the report of a failed call.
 */
#include "worker/cuda/check.cuh"

extern "C" {
#include "common/log.h"
}

const char *wk_cuda_err_str(cudaError_t e)
{
	return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

const char *wk_cuda_err_str(cublasStatus_t e)
{
	return e == CUBLAS_STATUS_SUCCESS ? nullptr : cublasGetStatusString(e);
}

void wk_cuda_report(const char *call, const char *file, int line, const char *what)
{
	struct cm_log_rec r;

	cm_log_begin(&r, CM_LOG_ERROR, "cuda_error");
	cm_log_str(&r, "call", call);
	cm_log_str(&r, "file", file);
	cm_log_i64(&r, "line", line);
	cm_log_str(&r, "error", what);
	cm_log_end(&r);
}

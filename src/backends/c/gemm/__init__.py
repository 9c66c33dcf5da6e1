"""Generated fp32 GEMM for the C backend (issue 16 item 4): machine parameters read at build
time (``machine``), tiles derived from them (``params``), the register-tile micro-kernel
(``microkernel``), packing and the blocked, threaded drivers with run-time variants
(``driver``), and the library entries the pipeline dispatches to (``library``)."""

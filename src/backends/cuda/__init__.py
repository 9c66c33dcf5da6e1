"""The CUDA target: CUDA C from the shared GPU lowering, PTX from NVRTC at build time, the driver API at run time."""

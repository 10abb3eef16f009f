# fusion::nvrtc: NVRTC alone. CUDA::nvrtc also links the CUDA driver (libcuda, the stub at build time),
# but fusion loads the driver itself at run time so that its binaries start on machines without one.
# A target of its own, so that CUDA::nvrtc stays as it is for everyone else (no global property edits).
if(NOT TARGET fusion::nvrtc)
  get_target_property(fusion_nvrtc_location CUDA::nvrtc IMPORTED_LOCATION)
  add_library(fusion::nvrtc UNKNOWN IMPORTED)
  set_target_properties(fusion::nvrtc PROPERTIES IMPORTED_LOCATION "${fusion_nvrtc_location}")
endif()

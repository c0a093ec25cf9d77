/*
 * ferry's libcuda.so.1 is only a name: it depends on ferry's libcudart.so.13
 * (next to it, found through its $ORIGIN run path), which holds the driver
 * front end with the rest of ferry. dlsym on this library's handle searches
 * that dependency too, so NVIDIA's runtime finds cuGetProcAddress there.
 */
int ferry_libcuda_name_only;

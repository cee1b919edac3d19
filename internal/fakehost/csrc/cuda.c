/*
 * libcuda.so.1 of a fake XRE 5 (P800) install: the CUDA-compatible layer
 * the vendor ships in /usr/local/xpu/so. xpu_fake_cuda_origin tells a
 * program that dlopens libcuda.so.1 that it got the XRE copy.
 */
const char *xpu_fake_cuda_origin(void)
{
	return "kunlun-xre";
}

int cuInit(unsigned int flags)
{
	(void)flags;
	return 0;
}

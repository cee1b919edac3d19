/*
 * xpu-cuda-probe: dlopens libcuda.so.1 the way CUDA-namespace frameworks do
 * and prints which file the loader gave it (path, device and inode, so a
 * test can compare them with the host's XRE file) and what the library
 * says it is.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

int main(void)
{
	const char *(*origin)(void);
	struct link_map *lm = NULL;
	struct stat st;
	void *h;

	h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) {
		fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror());
		return 1;
	}
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm) {
		fprintf(stderr, "dlinfo: %s\n", dlerror());
		return 1;
	}
	printf("libcuda.so.1 path: %s\n", lm->l_name);
	if (stat(lm->l_name, &st) == 0)
		printf("libcuda.so.1 file: %u:%u %lu\n", major(st.st_dev), minor(st.st_dev), (unsigned long)st.st_ino);
	origin = (const char *(*)(void))dlsym(h, "xpu_fake_cuda_origin");
	printf("libcuda.so.1 origin: %s\n", origin ? origin() : "unknown (not the fake XRE copy)");
	return 0;
}

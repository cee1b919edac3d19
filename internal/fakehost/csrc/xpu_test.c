/*
 * xpu-test: a small dynamically linked glibc program linked against
 * libxpurt.so.1, used by the hook tests to prove the driver library is
 * found through ld.so.cache inside a container.
 */
#include <stdio.h>

int xpurt_device_count(void);
const char *xpurt_version(void);

int main(void)
{
	printf("xpu devices: %d\n", xpurt_device_count());
	printf("xpurt version: %s\n", xpurt_version());
	return 0;
}

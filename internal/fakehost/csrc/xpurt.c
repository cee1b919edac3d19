/*
 * libxpurt.so.1 for fake Kunlun hosts: the two entry points the hook tests
 * call. The version string is a placeholder patched in place by the Go
 * builder (see internal/fakehost/elfpatch.go), so one compiled template
 * serves every XRE version.
 */
#include <dirent.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

const char xpurt_version_string[64] = "@@XPURT_VERSION_PLACEHOLDER_PADDED_TO_SIXTY_THREE_BYTES_XXXXXX@";

static int is_xpu_node(const char *name)
{
	const char *p;

	if (strncmp(name, "xpu", 3) != 0 || name[3] == '\0')
		return 0;
	for (p = name + 3; *p; p++)
		if (*p < '0' || *p > '9')
			return 0;
	return 1;
}

/* Counts /dev/xpuN entries; XPU_FAKEHOST_ROOT prefixes /dev when set. */
int xpurt_device_count(void)
{
	char dir[4096];
	const char *root = getenv("XPU_FAKEHOST_ROOT");
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(dir, sizeof(dir), "%s/dev", root ? root : "");
	d = opendir(dir);
	if (!d)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (is_xpu_node(de->d_name))
			n++;
	closedir(d);
	return n;
}

const char *xpurt_version(void)
{
	return xpurt_version_string;
}

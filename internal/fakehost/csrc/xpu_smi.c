/*
 * Fake xpu_smi: prints an nvidia-smi-like table of the /dev/xpuN nodes it
 * can see and exits 0. Built static so it runs in any container image.
 * Built with -DXPU_SMI_XRE5 it is the xpu-smi of XRE 5 instead: dynamic,
 * linked against libxpuml.so.1 and libxpunvidia-ml.so.1 like the real one,
 * so the loader refuses to start it where those libraries are missing.
 * XPU_FAKEHOST_ROOT prefixes /dev and /proc when set (for tests outside a
 * container).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#ifdef XPU_SMI_XRE5
/* Exported by every library of a fake host (csrc/template.c). */
int xpu_fake_library_marker(void);
#define XPU_SMI_TITLE "XPU-SMI 5 (xpu-cdi fake host) "
#else
#define XPU_SMI_TITLE "XPU-SMI (xpu-cdi fake host)  "
#endif

struct node {
	int index;
	char name[64];
	char type[8];
	unsigned int major, minor;
};

static int node_index(const char *name)
{
	const char *p;

	if (strncmp(name, "xpu", 3) != 0 || name[3] == '\0')
		return -1;
	for (p = name + 3; *p; p++)
		if (*p < '0' || *p > '9')
			return -1;
	return atoi(name + 3);
}

static int cmp(const void *a, const void *b)
{
	return ((const struct node *)a)->index - ((const struct node *)b)->index;
}

int main(void)
{
	const char *root = getenv("XPU_FAKEHOST_ROOT");
	char path[4096], version[64] = "N/A";
	struct node nodes[1024];
	struct dirent *de;
	struct stat st;
	int n = 0, i;
	FILE *f;
	DIR *d;

	if (!root)
		root = "";
#ifdef XPU_SMI_XRE5
	if (xpu_fake_library_marker() != 0x1d22) {
		fprintf(stderr, "xpu-smi: libxpuml.so.1 is not a Kunlun library\n");
		return 1;
	}
#endif
	snprintf(path, sizeof(path), "%s/proc/xpu/version", root);
	f = fopen(path, "r");
	if (f) {
		if (fgets(version, sizeof(version), f))
			version[strcspn(version, "\n")] = '\0';
		fclose(f);
	}
	snprintf(path, sizeof(path), "%s/dev", root);
	d = opendir(path);
	if (d) {
		while ((de = readdir(d)) != NULL && n < 1024) {
			int idx = node_index(de->d_name);
			if (idx < 0)
				continue;
			snprintf(path, sizeof(path), "%s/dev/%s", root, de->d_name);
			if (stat(path, &st) != 0)
				continue;
			nodes[n].index = idx;
			snprintf(nodes[n].name, sizeof(nodes[n].name), "/dev/%s", de->d_name);
			strcpy(nodes[n].type, S_ISCHR(st.st_mode) ? "char" : "file");
			nodes[n].major = major(st.st_rdev);
			nodes[n].minor = minor(st.st_rdev);
			n++;
		}
		closedir(d);
	}
	qsort(nodes, n, sizeof(nodes[0]), cmp);

	printf("+------------------------------------------------------+\n");
	printf("| " XPU_SMI_TITLE "Driver Version: %-8s|\n", version);
	printf("|-------+--------------------+---------------+---------|\n");
	printf("| XPU   | Name               | Major:Minor   | Type    |\n");
	printf("|=======+====================+===============+=========|\n");
	for (i = 0; i < n; i++) {
		char mm[32];
		snprintf(mm, sizeof(mm), "%u:%u", nodes[i].major, nodes[i].minor);
		printf("| %-5d | %-18s | %-13s | %-7s |\n", nodes[i].index, nodes[i].name, mm, nodes[i].type);
	}
	printf("+-------+--------------------+---------------+---------+\n");
	printf("%d device(s) found\n", n);
	return 0;
}

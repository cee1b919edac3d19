/*
 * Template for the many driver libraries of a fake Kunlun host. It is linked
 * with a long SONAME placeholder that the Go builder overwrites in .dynstr
 * (NUL padded), yielding real ELF shared objects with real SONAMEs.
 */
int xpu_fake_library_marker(void)
{
	return 0x1d22;
}

/* The library safety_dlmany dlopens: it needs libsafety_mallocs1.so, 2 and 3 (DT_NEEDED), which one dlopen loads with it. */
int safety_mallocs_lib(void);

/* 1, 2 or 3: whichever of the three the dynamic linker binds this library's reference to first. */
int safety_mallocs_all(void)
{
	return safety_mallocs_lib();
}

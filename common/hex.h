/* The value of one hexadecimal digit, for the text parsers of common/ and symbols/. */
#ifndef PTFIL_HEX_H
#define PTFIL_HEX_H

/* 0..15, or -1 when c is not a hexadecimal digit. */
static inline int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

#endif

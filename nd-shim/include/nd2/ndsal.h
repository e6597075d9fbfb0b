/*
 * ndsal.h: the SAL annotations (sal.h, specstrings.h) that ND headers and programs write on
 * their parameters, defined empty (gcc has no meaning for them), each only if not defined yet.
 * Included by ndwinbase.h. Every annotation that takes arguments is variadic here, so the
 * one- and two-argument forms of a name (_In_range_(lo, hi), _Out_writes_to_(n, c)) both fit.
 *
 * Six old names are also identifiers of libstdc++ and Linux headers (__in and __out in
 * <utility>, <algorithm>, <istream>; __success in <atomic>; __reserved, __callback, __override
 * in <linux/stat.h>, <link.h>, <envz.h>): as macros they would break those headers when included
 * after. They are defined only if ND_SHIM_LEGACY_SAL is defined, and then the program includes
 * its system headers before the ND headers (ndsal.h may be included again after defining it).
 */
#ifndef ND_SHIM_NDSAL_H
#define ND_SHIM_NDSAL_H

#ifndef _In_
#define _In_
#endif
#ifndef _Out_
#define _Out_
#endif
#ifndef _Inout_
#define _Inout_
#endif
#ifndef _In_opt_
#define _In_opt_
#endif
#ifndef _Out_opt_
#define _Out_opt_
#endif
#ifndef _Inout_opt_
#define _Inout_opt_
#endif
#ifndef _In_z_
#define _In_z_
#endif
#ifndef _In_opt_z_
#define _In_opt_z_
#endif
#ifndef _Outptr_
#define _Outptr_
#endif
#ifndef _Outptr_opt_
#define _Outptr_opt_
#endif
#ifndef _Outptr_result_maybenull_
#define _Outptr_result_maybenull_
#endif
#ifndef _Outptr_opt_result_maybenull_
#define _Outptr_opt_result_maybenull_
#endif
#ifndef _Deref_out_
#define _Deref_out_
#endif
#ifndef _Deref_out_opt_
#define _Deref_out_opt_
#endif
#ifndef _Deref_inout_
#define _Deref_inout_
#endif
#ifndef _Ret_maybenull_
#define _Ret_maybenull_
#endif
#ifndef _Ret_notnull_
#define _Ret_notnull_
#endif
#ifndef _Ret_z_
#define _Ret_z_
#endif
#ifndef _Check_return_
#define _Check_return_
#endif
#ifndef _Must_inspect_result_
#define _Must_inspect_result_
#endif
#ifndef _Use_decl_annotations_
#define _Use_decl_annotations_
#endif
#ifndef _Analysis_noreturn_
#define _Analysis_noreturn_
#endif
#ifndef _Printf_format_string_
#define _Printf_format_string_
#endif
#ifndef _Reserved_
#define _Reserved_
#endif
#ifndef _Frees_ptr_
#define _Frees_ptr_
#endif
#ifndef _Frees_ptr_opt_
#define _Frees_ptr_opt_
#endif
#ifndef _Post_invalid_
#define _Post_invalid_
#endif
#ifndef _Pre_notnull_
#define _Pre_notnull_
#endif
#ifndef _Pre_maybenull_
#define _Pre_maybenull_
#endif
#ifndef _Post_notnull_
#define _Post_notnull_
#endif
#ifndef _Post_maybenull_
#define _Post_maybenull_
#endif
#ifndef _Null_terminated_
#define _Null_terminated_
#endif
#ifndef _Notnull_
#define _Notnull_
#endif
#ifndef _Maybenull_
#define _Maybenull_
#endif
#ifndef _Interlocked_operand_
#define _Interlocked_operand_
#endif
#ifndef _Field_z_
#define _Field_z_
#endif
#ifndef _Out_z_
#define _Out_z_
#endif
#ifndef _Inout_z_
#define _Inout_z_
#endif
#ifndef _Result_nullonfailure_
#define _Result_nullonfailure_
#endif
#ifndef _Result_zeroonfailure_
#define _Result_zeroonfailure_
#endif
#ifndef _Post_ptr_invalid_
#define _Post_ptr_invalid_
#endif
#ifndef _Ret_
#define _Ret_
#endif
#ifndef _Pre_valid_
#define _Pre_valid_
#endif
#ifndef _Post_valid_
#define _Post_valid_
#endif
#ifndef _Valid_
#define _Valid_
#endif
#ifndef _Notvalid_
#define _Notvalid_
#endif
#ifndef _Kernel_requires_resource_held_
#define _Kernel_requires_resource_held_
#endif
#ifndef __inout
#define __inout
#endif
#ifndef __in_opt
#define __in_opt
#endif
#ifndef __out_opt
#define __out_opt
#endif
#ifndef __inout_opt
#define __inout_opt
#endif
#ifndef __deref_out
#define __deref_out
#endif
#ifndef __deref_out_opt
#define __deref_out_opt
#endif
#ifndef __deref_inout
#define __deref_inout
#endif
#ifndef __deref_inout_opt
#define __deref_inout_opt
#endif
#ifndef __deref_opt_out
#define __deref_opt_out
#endif
#ifndef __checkReturn
#define __checkReturn
#endif
#ifndef __nullterminated
#define __nullterminated
#endif
#ifndef __in_z
#define __in_z
#endif
#ifndef __in_opt_z
#define __in_opt_z
#endif
#ifndef __out_z
#define __out_z
#endif
#ifndef __inout_z
#define __inout_z
#endif
#ifndef __notnull
#define __notnull
#endif
#ifndef __maybenull
#define __maybenull
#endif
#ifndef __format_string
#define __format_string
#endif
#ifndef __possibly_notnullterminated
#define __possibly_notnullterminated
#endif
#ifndef _In_reads_
#define _In_reads_(...)
#endif
#ifndef _In_reads_opt_
#define _In_reads_opt_(...)
#endif
#ifndef _In_reads_bytes_
#define _In_reads_bytes_(...)
#endif
#ifndef _In_reads_bytes_opt_
#define _In_reads_bytes_opt_(...)
#endif
#ifndef _In_reads_z_
#define _In_reads_z_(...)
#endif
#ifndef _In_reads_or_z_
#define _In_reads_or_z_(...)
#endif
#ifndef _Out_writes_
#define _Out_writes_(...)
#endif
#ifndef _Out_writes_opt_
#define _Out_writes_opt_(...)
#endif
#ifndef _Out_writes_bytes_
#define _Out_writes_bytes_(...)
#endif
#ifndef _Out_writes_bytes_opt_
#define _Out_writes_bytes_opt_(...)
#endif
#ifndef _Out_writes_z_
#define _Out_writes_z_(...)
#endif
#ifndef _Out_writes_all_
#define _Out_writes_all_(...)
#endif
#ifndef _Out_writes_bytes_all_
#define _Out_writes_bytes_all_(...)
#endif
#ifndef _Out_writes_all_opt_
#define _Out_writes_all_opt_(...)
#endif
#ifndef _Out_writes_bytes_all_opt_
#define _Out_writes_bytes_all_opt_(...)
#endif
#ifndef _Inout_updates_
#define _Inout_updates_(...)
#endif
#ifndef _Inout_updates_opt_
#define _Inout_updates_opt_(...)
#endif
#ifndef _Inout_updates_bytes_
#define _Inout_updates_bytes_(...)
#endif
#ifndef _Inout_updates_bytes_opt_
#define _Inout_updates_bytes_opt_(...)
#endif
#ifndef _Inout_updates_z_
#define _Inout_updates_z_(...)
#endif
#ifndef _Outptr_result_buffer_
#define _Outptr_result_buffer_(...)
#endif
#ifndef _Outptr_result_bytebuffer_
#define _Outptr_result_bytebuffer_(...)
#endif
#ifndef _Outptr_opt_result_buffer_
#define _Outptr_opt_result_buffer_(...)
#endif
#ifndef _Outptr_opt_result_bytebuffer_
#define _Outptr_opt_result_bytebuffer_(...)
#endif
#ifndef _In_bytecount_
#define _In_bytecount_(...)
#endif
#ifndef _In_opt_bytecount_
#define _In_opt_bytecount_(...)
#endif
#ifndef _In_count_
#define _In_count_(...)
#endif
#ifndef _In_opt_count_
#define _In_opt_count_(...)
#endif
#ifndef _In_ecount_
#define _In_ecount_(...)
#endif
#ifndef _In_opt_ecount_
#define _In_opt_ecount_(...)
#endif
#ifndef _Out_bytecap_
#define _Out_bytecap_(...)
#endif
#ifndef _Out_opt_bytecap_
#define _Out_opt_bytecap_(...)
#endif
#ifndef _Out_cap_
#define _Out_cap_(...)
#endif
#ifndef _Out_opt_cap_
#define _Out_opt_cap_(...)
#endif
#ifndef _Out_ecap_
#define _Out_ecap_(...)
#endif
#ifndef _Inout_bytecount_
#define _Inout_bytecount_(...)
#endif
#ifndef _Inout_opt_bytecount_
#define _Inout_opt_bytecount_(...)
#endif
#ifndef _Inout_count_
#define _Inout_count_(...)
#endif
#ifndef _Inout_bytecap_
#define _Inout_bytecap_(...)
#endif
#ifndef _Inout_cap_
#define _Inout_cap_(...)
#endif
#ifndef _Deref_out_range_
#define _Deref_out_range_(...)
#endif
#ifndef _Field_size_
#define _Field_size_(...)
#endif
#ifndef _Field_size_opt_
#define _Field_size_opt_(...)
#endif
#ifndef _Field_size_bytes_
#define _Field_size_bytes_(...)
#endif
#ifndef _Field_size_bytes_opt_
#define _Field_size_bytes_opt_(...)
#endif
#ifndef _Field_size_full_
#define _Field_size_full_(...)
#endif
#ifndef _Field_size_bytes_full_
#define _Field_size_bytes_full_(...)
#endif
#ifndef _Ret_writes_
#define _Ret_writes_(...)
#endif
#ifndef _Ret_writes_bytes_
#define _Ret_writes_bytes_(...)
#endif
#ifndef _Ret_writes_maybenull_
#define _Ret_writes_maybenull_(...)
#endif
#ifndef _Ret_writes_bytes_maybenull_
#define _Ret_writes_bytes_maybenull_(...)
#endif
#ifndef _Success_
#define _Success_(...)
#endif
#ifndef _Analysis_assume_
#define _Analysis_assume_(...)
#endif
#ifndef _Releases_lock_
#define _Releases_lock_(...)
#endif
#ifndef _Acquires_lock_
#define _Acquires_lock_(...)
#endif
#ifndef _Requires_lock_held_
#define _Requires_lock_held_(...)
#endif
#ifndef _Requires_lock_not_held_
#define _Requires_lock_not_held_(...)
#endif
#ifndef _Releases_exclusive_lock_
#define _Releases_exclusive_lock_(...)
#endif
#ifndef _Acquires_exclusive_lock_
#define _Acquires_exclusive_lock_(...)
#endif
#ifndef _Releases_shared_lock_
#define _Releases_shared_lock_(...)
#endif
#ifndef _Acquires_shared_lock_
#define _Acquires_shared_lock_(...)
#endif
#ifndef _Guarded_by_
#define _Guarded_by_(...)
#endif
#ifndef _Always_
#define _Always_(...)
#endif
#ifndef _Pre_satisfies_
#define _Pre_satisfies_(...)
#endif
#ifndef _Post_satisfies_
#define _Post_satisfies_(...)
#endif
#ifndef _Post_equal_to_
#define _Post_equal_to_(...)
#endif
#ifndef _Out_range_
#define _Out_range_(...)
#endif
#ifndef _In_range_
#define _In_range_(...)
#endif
#ifndef _Deref_in_range_
#define _Deref_in_range_(...)
#endif
#ifndef _Pre_readable_size_
#define _Pre_readable_size_(...)
#endif
#ifndef _Pre_writable_size_
#define _Pre_writable_size_(...)
#endif
#ifndef _Post_readable_size_
#define _Post_readable_size_(...)
#endif
#ifndef _Post_writable_size_
#define _Post_writable_size_(...)
#endif
#ifndef _Pre_readable_byte_size_
#define _Pre_readable_byte_size_(...)
#endif
#ifndef _Pre_writable_byte_size_
#define _Pre_writable_byte_size_(...)
#endif
#ifndef _Post_readable_byte_size_
#define _Post_readable_byte_size_(...)
#endif
#ifndef _Post_writable_byte_size_
#define _Post_writable_byte_size_(...)
#endif
#ifndef _Outptr_result_buffer_maybenull_
#define _Outptr_result_buffer_maybenull_(...)
#endif
#ifndef _Ret_range_
#define _Ret_range_(...)
#endif
#ifndef _Strict_type_match_
#define _Strict_type_match_(...)
#endif
#ifndef _Struct_size_bytes_
#define _Struct_size_bytes_(...)
#endif
#ifndef _Function_class_
#define _Function_class_(...)
#endif
#ifndef _IRQL_requires_
#define _IRQL_requires_(...)
#endif
#ifndef _IRQL_requires_max_
#define _IRQL_requires_max_(...)
#endif
#ifndef __in_bcount
#define __in_bcount(...)
#endif
#ifndef __in_bcount_opt
#define __in_bcount_opt(...)
#endif
#ifndef __in_ecount
#define __in_ecount(...)
#endif
#ifndef __in_ecount_opt
#define __in_ecount_opt(...)
#endif
#ifndef __out_bcount
#define __out_bcount(...)
#endif
#ifndef __out_bcount_opt
#define __out_bcount_opt(...)
#endif
#ifndef __out_ecount
#define __out_ecount(...)
#endif
#ifndef __out_ecount_opt
#define __out_ecount_opt(...)
#endif
#ifndef __inout_bcount
#define __inout_bcount(...)
#endif
#ifndef __inout_bcount_opt
#define __inout_bcount_opt(...)
#endif
#ifndef __inout_ecount
#define __inout_ecount(...)
#endif
#ifndef __inout_ecount_opt
#define __inout_ecount_opt(...)
#endif
#ifndef __deref_out_bcount
#define __deref_out_bcount(...)
#endif
#ifndef __deref_out_ecount
#define __deref_out_ecount(...)
#endif
#ifndef __deref_out_bcount_opt
#define __deref_out_bcount_opt(...)
#endif
#ifndef __deref_out_ecount_opt
#define __deref_out_ecount_opt(...)
#endif
#ifndef __field_bcount
#define __field_bcount(...)
#endif
#ifndef __field_ecount
#define __field_ecount(...)
#endif
#ifndef __field_bcount_opt
#define __field_bcount_opt(...)
#endif
#ifndef __field_ecount_opt
#define __field_ecount_opt(...)
#endif
#ifndef __analysis_assume
#define __analysis_assume(...)
#endif
#ifndef __in_bcount_z
#define __in_bcount_z(...)
#endif
#ifndef __in_ecount_z
#define __in_ecount_z(...)
#endif
#ifndef __out_bcount_z
#define __out_bcount_z(...)
#endif
#ifndef __out_ecount_z
#define __out_ecount_z(...)
#endif
#ifndef __deref_in_bcount
#define __deref_in_bcount(...)
#endif
#ifndef __deref_in_ecount
#define __deref_in_ecount(...)
#endif
#ifndef __out_xcount
#define __out_xcount(...)
#endif
#ifndef __in_xcount
#define __in_xcount(...)
#endif
#ifndef __out_bcount_full
#define __out_bcount_full(...)
#endif
#ifndef __out_ecount_full
#define __out_ecount_full(...)
#endif
#ifndef __inout_bcount_full
#define __inout_bcount_full(...)
#endif
#ifndef __inout_ecount_full
#define __inout_ecount_full(...)
#endif
#ifndef __typefix
#define __typefix(...)
#endif
#ifndef __range_max
#define __range_max(...)
#endif
#ifndef _In_reads_to_ptr_
#define _In_reads_to_ptr_(...)
#endif
#ifndef _Out_writes_to_
#define _Out_writes_to_(...)
#endif
#ifndef _Out_writes_to_opt_
#define _Out_writes_to_opt_(...)
#endif
#ifndef _Out_writes_bytes_to_
#define _Out_writes_bytes_to_(...)
#endif
#ifndef _Out_writes_bytes_to_opt_
#define _Out_writes_bytes_to_opt_(...)
#endif
#ifndef _Inout_updates_to_
#define _Inout_updates_to_(...)
#endif
#ifndef _Inout_updates_bytes_to_
#define _Inout_updates_bytes_to_(...)
#endif
#ifndef _Outptr_result_buffer_to_
#define _Outptr_result_buffer_to_(...)
#endif
#ifndef _Outptr_result_bytebuffer_to_
#define _Outptr_result_bytebuffer_to_(...)
#endif
#ifndef _Out_bytecap_post_bytecount_
#define _Out_bytecap_post_bytecount_(...)
#endif
#ifndef _Out_opt_bytecap_post_bytecount_
#define _Out_opt_bytecap_post_bytecount_(...)
#endif
#ifndef _Out_cap_post_count_
#define _Out_cap_post_count_(...)
#endif
#ifndef _Out_opt_cap_post_count_
#define _Out_opt_cap_post_count_(...)
#endif
#ifndef _Out_z_bytecap_post_bytecount_
#define _Out_z_bytecap_post_bytecount_(...)
#endif
#ifndef _Out_bytecap_x_
#define _Out_bytecap_x_(...)
#endif
#ifndef _Out_cap_x_
#define _Out_cap_x_(...)
#endif
#ifndef _When_
#define _When_(...)
#endif
#ifndef _Field_range_
#define _Field_range_(...)
#endif
#ifndef _Ret_writes_to_
#define _Ret_writes_to_(...)
#endif
#ifndef _Ret_writes_bytes_to_
#define _Ret_writes_bytes_to_(...)
#endif
#ifndef _Inout_bytecap_post_bytecount_
#define _Inout_bytecap_post_bytecount_(...)
#endif
#ifndef __out_bcount_part
#define __out_bcount_part(...)
#endif
#ifndef __out_bcount_part_opt
#define __out_bcount_part_opt(...)
#endif
#ifndef __out_ecount_part
#define __out_ecount_part(...)
#endif
#ifndef __out_ecount_part_opt
#define __out_ecount_part_opt(...)
#endif
#ifndef __inout_bcount_part
#define __inout_bcount_part(...)
#endif
#ifndef __inout_bcount_part_opt
#define __inout_bcount_part_opt(...)
#endif
#ifndef __inout_ecount_part
#define __inout_ecount_part(...)
#endif
#ifndef __inout_ecount_part_opt
#define __inout_ecount_part_opt(...)
#endif
#ifndef __deref_out_bcount_part
#define __deref_out_bcount_part(...)
#endif
#ifndef __deref_out_ecount_part
#define __deref_out_ecount_part(...)
#endif
#ifndef __deref_out_bcount_part_opt
#define __deref_out_bcount_part_opt(...)
#endif
#ifndef __deref_out_ecount_part_opt
#define __deref_out_ecount_part_opt(...)
#endif
#ifndef __field_bcount_part
#define __field_bcount_part(...)
#endif
#ifndef __field_ecount_part
#define __field_ecount_part(...)
#endif
#ifndef __field_bcount_part_opt
#define __field_bcount_part_opt(...)
#endif
#ifndef __field_ecount_part_opt
#define __field_ecount_part_opt(...)
#endif
#ifndef __in_range
#define __in_range(...)
#endif
#ifndef __out_range
#define __out_range(...)
#endif
#ifndef __deref_out_range
#define __deref_out_range(...)
#endif

#endif /* ND_SHIM_NDSAL_H */

#if defined(ND_SHIM_LEGACY_SAL) && !defined(ND_SHIM_NDSAL_LEGACY_H)
#define ND_SHIM_NDSAL_LEGACY_H
#ifndef __in
#define __in
#endif
#ifndef __out
#define __out
#endif
#ifndef __reserved
#define __reserved
#endif
#ifndef __callback
#define __callback
#endif
#ifndef __override
#define __override
#endif
#ifndef __success
#define __success(...)
#endif
#endif /* ND_SHIM_LEGACY_SAL */

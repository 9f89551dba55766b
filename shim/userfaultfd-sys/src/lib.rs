//! The items of `userfaultfd-sys` 0.6 that the `userfaultfd` crate 0.9 (with any of its
//! features) and mevi-actors' `src/kernel/uffd.rs` use, with the same names, types and values,
//! taken from `linux-raw-sys` (the kernel's uapi headers, generated once and published).
//!
//! The types are `userfaultfd-sys`'s, not the header's: `linux-raw-sys` gives every constant as
//! `u32`, while the `userfaultfd` crate builds `u64` flag sets from them and matches `u8` event
//! codes. Each constant is converted here, and the build fails if a value does not fit.
//! Only what `linux-raw-sys` lacks is written out, with the header's definition beside it.
//! `userfaultfd-sys`'s other items (`UFFD_API_FEATURES`, `UFFD_API_IOCTLS`, ...) are left out:
//! nothing here uses them.

#![no_std]
#![allow(non_camel_case_types, non_upper_case_globals)]

use linux_raw_sys::general as uapi;

/// The kernel's structures, as `linux-raw-sys` publishes them.
pub use uapi::{
    uffd_msg, uffdio_api, uffdio_continue, uffdio_copy, uffdio_range, uffdio_register,
    uffdio_writeprotect, uffdio_zeropage,
};

/// Defines each named constant with the type given, from `linux-raw-sys`'s constant of that name;
/// a value that does not fit the type stops the build.
macro_rules! uapi_constants {
    ($ty:ty: $($name:ident),+ $(,)?) => {
        $(
            pub const $name: $ty = {
                assert!(uapi::$name as u64 <= <$ty>::MAX as u64, "uapi value out of range");
                uapi::$name as $ty
            };
        )+
    };
}

// The ioctl type, and the `/dev/userfaultfd` ioctl type.
uapi_constants!(u8: UFFDIO);
uapi_constants!(u32: USERFAULTFD_IOC, UFFD_USER_MODE_ONLY);

// The ioctl numbers, as bit positions in `uffdio_api.ioctls` too.
uapi_constants!(u64:
    _UFFDIO_REGISTER,
    _UFFDIO_UNREGISTER,
    _UFFDIO_WAKE,
    _UFFDIO_COPY,
    _UFFDIO_ZEROPAGE,
    _UFFDIO_WRITEPROTECT,
    _UFFDIO_CONTINUE,
    _UFFDIO_API,
);

uapi_constants!(u64: UFFD_API);

// `uffd_msg.event`.
uapi_constants!(u8:
    UFFD_EVENT_PAGEFAULT,
    UFFD_EVENT_FORK,
    UFFD_EVENT_REMAP,
    UFFD_EVENT_REMOVE,
    UFFD_EVENT_UNMAP,
);

// `uffd_msg.arg.pagefault.flags`.
uapi_constants!(u64:
    UFFD_PAGEFAULT_FLAG_WRITE,
    UFFD_PAGEFAULT_FLAG_WP,
    UFFD_PAGEFAULT_FLAG_MINOR,
);

// `uffdio_api.features`.
uapi_constants!(u64:
    UFFD_FEATURE_PAGEFAULT_FLAG_WP,
    UFFD_FEATURE_EVENT_FORK,
    UFFD_FEATURE_EVENT_REMAP,
    UFFD_FEATURE_EVENT_REMOVE,
    UFFD_FEATURE_MISSING_HUGETLBFS,
    UFFD_FEATURE_MISSING_SHMEM,
    UFFD_FEATURE_EVENT_UNMAP,
    UFFD_FEATURE_SIGBUS,
    UFFD_FEATURE_THREAD_ID,
);

// The `mode` fields.
uapi_constants!(u64:
    UFFDIO_REGISTER_MODE_MISSING,
    UFFDIO_REGISTER_MODE_WP,
    UFFDIO_REGISTER_MODE_MINOR,
    UFFDIO_COPY_MODE_DONTWAKE,
    UFFDIO_ZEROPAGE_MODE_DONTWAKE,
);

// Missing from `linux-raw-sys`: the header defines these with a cast, which its generator does not
// evaluate. Values from include/uapi/linux/userfaultfd.h.
/// `#define UFFDIO_WRITEPROTECT_MODE_WP ((__u64)1<<0)`
pub const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1 << 0;
/// `#define UFFDIO_WRITEPROTECT_MODE_DONTWAKE ((__u64)1<<1)`
pub const UFFDIO_WRITEPROTECT_MODE_DONTWAKE: u64 = 1 << 1;
/// `#define UFFDIO_CONTINUE_MODE_DONTWAKE ((__u64)1<<0)`
pub const UFFDIO_CONTINUE_MODE_DONTWAKE: u64 = 1 << 0;

/// The request by which a program registers a range (`_IOWR(UFFDIO, _UFFDIO_REGISTER, struct
/// uffdio_register)`); mevi-actors recognises it in a tracee's `ioctl` calls.
pub const UFFDIO_REGISTER: u32 = linux_raw_sys::ioctl::UFFDIO_REGISTER;

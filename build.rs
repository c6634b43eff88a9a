// Builds the small C helper that gives INCRBYFLOAT Redis's long double
// arithmetic (see csrc/ldouble.c).
fn main() {
    println!("cargo:rerun-if-changed=csrc/ldouble.c");
    cc::Build::new()
        .file("csrc/ldouble.c")
        .opt_level(2)
        .compile("kvstore_ldouble");
}

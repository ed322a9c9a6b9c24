//! kubesim against kube-rs, a client nobody here wrote: if kube-rs works against kubesim the way
//! it works against a real API server, later tests built on kubesim mean something.

mod fidelity {
    pub mod apps;
    pub mod bad_input;
    pub mod controller;
    pub mod crud;
    pub mod events;
    pub mod gc;
    pub mod in_cluster;
    pub mod logs;
    pub mod pods;
    pub mod quota;
    pub mod rbac;
    pub mod spark_image;
    pub mod support;
    pub mod watch;
    pub mod wire;
    pub mod world;
}

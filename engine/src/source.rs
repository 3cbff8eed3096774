//! Where a controller's objects come from: a resource collection on the apiserver, named by
//! the object type (kube's `Api` scopes), or in-process pushes.

use std::fmt;
use std::marker::PhantomData;

use reconcile_core::pod::PodView;
use reconcile_core::{Predicate, Transform, WatchParams};

use super::transport::Requests;

/// Where objects of type `O` come from: the apiserver through transport `T`, or in-process
/// pushes through a [`Handle`](crate::Handle).
///
/// For a `kube::Resource` the URL comes from the type: [`Source::all`],
/// [`Source::namespaced`], or the `_with` forms for a `DynamicObject` and its
/// `ApiResource`. A `PartialObjectMeta<K>` source asks for metadata only. Label and field
/// selectors and the watch timeout are set on the source, as on kube-runtime's
/// `watcher::Config`.
pub struct Source<O, T> {
    pub(crate) remote: Option<(T, Requests)>,
    pub(crate) params: WatchParams,
    /// Which updates of its objects wake a parent ([`Source::predicate`]).
    pub(crate) predicate: Option<Predicate<O>>,
    /// Applied to each object after decoding, before caching ([`Source::modify`]).
    pub(crate) transform: Option<Transform<O>>,
    object: PhantomData<fn() -> O>,
}

impl<O, T> fmt::Debug for Source<O, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Source")
            .field("requests", &self.remote.as_ref().map(|(_, r)| r))
            .field("params", &self.params)
            .field("predicate", &self.predicate)
            .field("transform", &self.transform)
            .finish()
    }
}

/// Something that names a transport and a collection, such as kube's `Api<K>` on the tokio
/// driver: what [`Source::from_api`] accepts.
pub trait IntoSource<T> {
    /// The object type of the collection.
    type Object;

    /// The source listing and watching the collection.
    fn into_source(self) -> Source<Self::Object, T>;
}

impl<O, T> Source<O, T> {
    /// LIST and WATCH the collection at `url_path` (for example
    /// `/api/v1/namespaces/default/pods`), for a collection no type names; `params.namespace`
    /// must match the path. Prefer [`Source::all`] and [`Source::namespaced`].
    pub fn kubernetes(
        transport: impl Into<T>,
        url_path: impl Into<String>,
        params: WatchParams,
    ) -> Self {
        Source {
            remote: Some((transport.into(), Requests::new(url_path))),
            params,
            predicate: None,
            transform: None,
            object: PhantomData,
        }
    }

    /// Objects pushed through [`Handle`](crate::Handle): each stream must open with a
    /// `replace`.
    #[must_use]
    pub fn in_process() -> Self {
        Source {
            remote: None,
            params: WatchParams::default(),
            predicate: None,
            transform: None,
            object: PhantomData,
        }
    }

    /// The source kube's `Api<K>` (or another [`IntoSource`]) names: its transport, its URL
    /// and its namespace.
    pub fn from_api(api: impl IntoSource<T, Object = O>) -> Self {
        api.into_source()
    }

    /// Scopes LIST and WATCH with a label selector (server-side).
    #[must_use]
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.params = self.params.labels(selector);
        self
    }

    /// Scopes LIST and WATCH with a field selector (server-side).
    #[must_use]
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.params = self.params.fields(selector);
        self
    }

    /// Sets the WATCH `timeoutSeconds` (default 300).
    #[must_use]
    pub fn timeout(mut self, seconds: u32) -> Self {
        self.params = self.params.timeout(seconds);
        self
    }

    /// LISTs in pages of at most `n` objects (`limit` and `continue`; kube-runtime's
    /// `watcher::Config::page_size`); `0` lists in one request (the default). The pages are
    /// gathered and applied as one listing after the last, so readers never see part of it.
    ///
    /// One request stays the default because, measured on a real kube-apiserver at 10k and
    /// 50k pods (`docs/benchmarks.md`, "Paged LIST"), paging made the first sync no faster
    /// and the apiserver no cheaper, with its watch cache on or off, and our memory is the
    /// same either way (the listing is decoded as it streams). Page to bound what an apiserver
    /// without a watch cache builds per request; then prefer large pages (5000): pages of
    /// 500 cost etcd about twice the CPU. Paged or not, one listing is bounded at 512 MiB of
    /// bodies (see `docs/alignment.md`, LIST pagination).
    #[must_use]
    pub fn page_size(mut self, n: u32) -> Self {
        self.params = self.params.list_pages(n);
        self
    }

    /// Fetches the initial state with a streaming list instead of a LIST (kube-runtime's
    /// `watcher::Config::streaming_lists`, client-go's WatchList): one WATCH with
    /// `sendInitialEvents=true`, whose events are applied as one listing at the bookmark
    /// that ends them, after which the same stream is the watch. An apiserver that refuses
    /// it (one older than 1.27, or the `WatchList` feature gate off) makes the source fall
    /// back to LIST+WATCH for the rest of the run. Off by default, as in kube-runtime.
    #[must_use]
    pub fn streaming_lists(mut self) -> Self {
        self.params = self.params.streaming_lists();
        self
    }

    /// Filters the updates of this source's objects (controller-runtime's
    /// `WithPredicates`, kube-runtime's `predicate_filter`): an update `predicate` rejects
    /// is still cached, but wakes no parent. New objects, deletions and moves to another
    /// parent always wake. Works on the primary and on every secondary source.
    #[must_use]
    pub fn predicate(mut self, predicate: Predicate<O>) -> Self {
        self.predicate = Some(predicate);
        self
    }

    /// Changes each object of this source after it is decoded and before it is cached
    /// (kube-runtime's `watcher(..).modify(..)`, controller-runtime's `DefaultTransform`), on
    /// every path: LIST, paged LIST, streaming list, WATCH and in-process pushes (tombstones
    /// included). The reconcile, the [`Cache`](crate::Cache) and the predicate see the
    /// changed object. A second call runs after the first. `f` must be deterministic: it
    /// runs inside the sans-IO core (see [`Transform`]).
    ///
    /// The ready-made ones drop what a controller rarely reads but every object carries:
    /// [`strip_managed_fields`](reconcile_core::transform::strip_managed_fields) and
    /// [`strip_last_applied`](reconcile_core::transform::strip_last_applied). On full
    /// k8s-openapi Pods with both the cache holds 61 % less heap, 23 KB a pod instead of 60 KB
    /// (`docs/benchmarks.md`, "Transforms"):
    ///
    /// ```
    /// # use k8s_openapi::api::core::v1::Pod;
    /// # use reconcile_engine::Source;
    /// use reconcile_core::transform::{strip_last_applied, strip_managed_fields};
    /// let source = Source::<Pod, ()>::in_process()
    ///     .modify(strip_managed_fields)
    ///     .modify(strip_last_applied);
    /// # let _ = source;
    /// ```
    #[must_use]
    pub fn modify(mut self, f: impl Fn(&mut O) + Send + Sync + 'static) -> Self
    where
        O: 'static,
    {
        let next = Transform::new(f);
        self.transform = Some(match self.transform.take() {
            Some(first) => first.then(next),
            None => next,
        });
        self
    }

    /// Asks the apiserver for Kubernetes protobuf (`application/vnd.kubernetes.protobuf`) on
    /// LIST and WATCH (client-go's `ContentType`), with JSON as the fallback it accepts: a
    /// custom resource is answered in JSON, and decoded so. Only for object types with a
    /// protobuf decoder ([`Object::protobuf`](reconcile_core::Object::protobuf)): [`PodView`],
    /// k8s-openapi's built-in types (`Deployment`, `ConfigMap`, …) and metadata only
    /// (`PartialObjectMeta` of any kind, custom resources' too: asked for as client-go's
    /// metadata client does); on any other type (a custom resource, `DynamicObject`)
    /// building the controller fails with `ConfigError::NoProtobuf`.
    #[must_use]
    pub fn protobuf(mut self) -> Self {
        self.params = self.params.protobuf();
        self
    }

    /// Asks the apiserver for `PartialObjectMetadata` (metadata only) on LIST and WATCH.
    /// Sources of `PartialObjectMeta<K>` do so already; this is for a hand-made URL.
    #[must_use]
    pub fn metadata_only(mut self) -> Self {
        if let Some((_, requests)) = &mut self.remote {
            requests.metadata_only = true;
        }
        self
    }

    /// The LIST / WATCH scoping.
    #[must_use]
    pub fn params(&self) -> &WatchParams {
        &self.params
    }

    /// The collection's URL path; `None` for an in-process source.
    #[must_use]
    pub fn url_path(&self) -> Option<&str> {
        self.remote.as_ref().map(|(_, r)| r.url_path())
    }

    /// Whether LIST and WATCH ask for metadata only.
    #[must_use]
    pub fn is_metadata_only(&self) -> bool {
        self.remote.as_ref().is_some_and(|(_, r)| r.metadata_only)
    }
}

impl<K: kube_core::Resource, T> Source<K, T> {
    /// Every `K` in the cluster (kube's `Api::all`).
    pub fn all(transport: impl Into<T>) -> Self
    where
        K::DynamicType: Default,
    {
        Self::all_with(transport, &K::DynamicType::default())
    }

    /// The `K`s of `namespace` (kube's `Api::namespaced`).
    pub fn namespaced(transport: impl Into<T>, namespace: &str) -> Self
    where
        K::DynamicType: Default,
    {
        Self::namespaced_with(transport, namespace, &K::DynamicType::default())
    }

    /// Every `K` in the cluster, for a type whose URL needs `dyntype` (a `DynamicObject`
    /// with its `ApiResource`; kube's `Api::all_with`).
    pub fn all_with(transport: impl Into<T>, dyntype: &K::DynamicType) -> Self {
        Self::resource(transport, None, dyntype)
    }

    /// The `K`s of `namespace`, for a type whose URL needs `dyntype` (kube's
    /// `Api::namespaced_with`).
    pub fn namespaced_with(
        transport: impl Into<T>,
        namespace: &str,
        dyntype: &K::DynamicType,
    ) -> Self {
        Self::resource(transport, Some(namespace), dyntype)
    }

    fn resource(
        transport: impl Into<T>,
        namespace: Option<&str>,
        dyntype: &K::DynamicType,
    ) -> Self {
        let url = K::url_path(dyntype, namespace);
        let params = match namespace {
            Some(ns) => WatchParams::namespaced(ns),
            None => WatchParams::default(),
        };
        let mut source = Source::kubernetes(transport, url, params);
        if let Some((_, requests)) = &mut source.remote {
            requests.kind = Some(K::kind(dyntype).into_owned());
        }
        if K::metadata_api() {
            source.metadata_only()
        } else {
            source
        }
    }
}

impl<T> Source<PodView, T> {
    /// The pods of `namespace` (all namespaces when `None`), as the compact [`PodView`]:
    /// the fast path for Pods, caching only what a controller of pods reads.
    pub fn pods(transport: impl Into<T>, namespace: Option<&str>) -> Self {
        let (path, params) = match namespace {
            Some(ns) => (
                format!("/api/v1/namespaces/{ns}/pods"),
                WatchParams::namespaced(ns),
            ),
            None => ("/api/v1/pods".to_owned(), WatchParams::default()),
        };
        Source::kubernetes(transport, path, params)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use kube_core::{ApiResource, DynamicObject, GroupVersionKind, PartialObjectMeta};

    use super::*;

    #[test]
    fn the_url_comes_from_the_type() {
        let s = Source::<Deployment, ()>::namespaced((), "shop");
        assert_eq!(
            s.url_path(),
            Some("/apis/apps/v1/namespaces/shop/deployments")
        );
        assert_eq!(s.params().namespace.as_deref(), Some("shop"));
        assert!(!s.is_metadata_only());
        let s = Source::<Deployment, ()>::all(());
        assert_eq!(s.url_path(), Some("/apis/apps/v1/deployments"));
        assert_eq!(s.params().namespace, None);
    }

    #[test]
    fn a_dynamic_object_names_its_url_through_its_api_resource() {
        let gvk = GroupVersionKind::gvk("example.com", "v1", "Shop");
        let ar = ApiResource::from_gvk_with_plural(&gvk, "shops");
        let s = Source::<DynamicObject, ()>::namespaced_with((), "a", &ar);
        assert_eq!(
            s.url_path(),
            Some("/apis/example.com/v1/namespaces/a/shops")
        );
    }

    #[test]
    fn a_partial_object_meta_source_asks_for_metadata_only() {
        let s = Source::<PartialObjectMeta<Deployment>, ()>::all(());
        assert!(s.is_metadata_only());
        assert_eq!(s.url_path(), Some("/apis/apps/v1/deployments"));
    }
}

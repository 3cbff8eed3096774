//! Every `kube::Resource` is an [`Object`] with no impl written: built-in types, dynamic
//! objects and metadata-only views, decoded from a LIST and grouped by a ready-made key map.
//! With `kube::ResourceExt` in scope too, its methods still resolve (no E0034).

use k8s_openapi::api::apps::v1::Deployment;
use kube_core::{DynamicObject, PartialObjectMeta, ResourceExt};
use reconcile_core::list::parse_list;
use reconcile_core::{KeyMap, Object, ObjectKey};

const LIST: &str = r#"{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":[
  {"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","resourceVersion":"7",
   "labels":{"tier":"front"},"ownerReferences":[{"apiVersion":"example.com/v1","kind":"Shop","name":"main","uid":"u1","controller":true}]},
   "spec":{"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}}}}}]}"#;

fn check<O: Object>(items: &[O]) {
    let [object] = items else {
        panic!("one item expected")
    };
    assert_eq!(object.key(), Some(ObjectKey::new(Some("shop"), "web")));
    assert_eq!(object.object_resource_version(), Some("7"));
    assert_eq!(object.label("tier"), Some("front"));
    let owner = object.controller_owner().expect("controller owner");
    assert_eq!((owner.kind, owner.name, owner.uid), ("Shop", "main", "u1"));
    assert_eq!(
        KeyMap::<O, String>::by_owner().parent_of(object).unwrap(),
        "shop/main"
    );
    assert_eq!(
        KeyMap::<O, ObjectKey>::by_object()
            .parent_of(object)
            .unwrap()
            .as_str(),
        "shop/web"
    );
}

#[test]
fn a_built_in_type_is_an_object() {
    let list = parse_list::<Deployment>(LIST.as_bytes()).unwrap();
    check(&list.items);
    // kube's own accessors still resolve with both traits in scope.
    assert_eq!(list.items[0].namespace().as_deref(), Some("shop"));
    assert_eq!(list.items[0].name_any(), "web");
}

#[test]
fn a_dynamic_object_is_an_object() {
    let list = parse_list::<DynamicObject>(LIST.as_bytes()).unwrap();
    check(&list.items);
    assert!(list.items[0].data["spec"]["selector"].is_object());
}

#[test]
fn a_metadata_only_view_is_an_object() {
    let list = parse_list::<PartialObjectMeta<Deployment>>(LIST.as_bytes()).unwrap();
    check(&list.items);
    assert_eq!(list.items[0].resource_version().as_deref(), Some("7"));
}

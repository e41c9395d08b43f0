//! Stable wire names, given once. [`wire_enum!`] declares a field-less enum from one table of
//! `Variant = "wire_name"` pairs and derives everything else from that table: `as_str`,
//! `from_wire`, `Display`, serde in both directions, and `ALL` (every variant, in order). Callers
//! (clients, the ledger, operators' scripts) match on these names, so there is no second list
//! that could drift.

/// Declare an enum whose variants' wire names are given once (see the module docs). The crate
/// that calls it depends on `serde`.
#[macro_export]
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $wire:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )*
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The stable wire name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $wire,)*
                }
            }

            /// The variant with this wire name.
            pub fn from_wire(name: &str) -> Option<$name> {
                match name {
                    $($wire => Some($name::$variant),)*
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let name = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
                $name::from_wire(&name).ok_or_else(|| {
                    serde::de::Error::unknown_variant(&name, &[$($wire,)*])
                })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::super::{Code, Decision, Stage, Status};

    /// Each variant's wire name survives serialization both ways, is its `as_str`, and is
    /// nobody else's; an unknown name is refused.
    fn round_trips<T>(all: &[T], as_str: fn(&T) -> &'static str)
    where
        T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let mut seen = std::collections::BTreeSet::new();
        for v in all {
            let wire = serde_json::to_value(v).unwrap();
            assert_eq!(wire, serde_json::json!(as_str(v)), "{v:?}");
            assert_eq!(&serde_json::from_value::<T>(wire).unwrap(), v);
            assert!(seen.insert(as_str(v)), "{} is used twice", as_str(v));
        }
        assert!(serde_json::from_value::<T>(serde_json::json!("no_such_name")).is_err());
    }

    #[test]
    fn every_wire_name_round_trips() {
        round_trips(Code::ALL, |c| c.as_str());
        round_trips(Status::ALL, |s| s.as_str());
        round_trips(Stage::ALL, |s| s.as_str());
        round_trips(Decision::ALL, |d| d.as_str());
        assert_eq!(Code::ALL.len(), 26);
        assert_eq!(Status::ALL.len(), 4);
        assert_eq!(Stage::from_wire("authorize"), Some(Stage::Authorize));
    }
}

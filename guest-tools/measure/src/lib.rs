//! Unit conversion tools: lengths and temperatures.
wit_bindgen::generate!({
    path: ["../../wit", "wit"],
    world: "example:measure/measure",
    generate_all,
});

use exports::example::measure::tools::{Guest, LengthUnit, TemperatureUnit};

struct Measure;

/// How many micrometres one `unit` is: every unit is an exact integer multiple, so a
/// conversion is one multiplication and one correctly rounded division.
fn micrometres_per(unit: LengthUnit) -> f64 {
    match unit {
        LengthUnit::Millimetre => 1_000.0,
        LengthUnit::Centimetre => 10_000.0,
        LengthUnit::Metre => 1_000_000.0,
        LengthUnit::Kilometre => 1_000_000_000.0,
        LengthUnit::Inch => 25_400.0,
        LengthUnit::Foot => 304_800.0,
        LengthUnit::Yard => 914_400.0,
        LengthUnit::Mile => 1_609_344_000.0,
    }
}

/// Round to 12 significant decimal digits, removing binary floating-point noise such as
/// 80.33000000000004 while keeping far more precision than any physical measurement has.
fn tidy(x: f64) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    format!("{x:.11e}").parse().unwrap_or(x)
}

fn unit_name(unit: TemperatureUnit) -> &'static str {
    match unit {
        TemperatureUnit::Celsius => "celsius",
        TemperatureUnit::Fahrenheit => "fahrenheit",
        TemperatureUnit::Kelvin => "kelvin",
    }
}

impl Guest for Measure {
    fn convert_length(value: f64, from: LengthUnit, to: LengthUnit) -> f64 {
        if from == to {
            return value;
        }
        let (from_um, to_um) = (micrometres_per(from), micrometres_per(to));
        let scaled = value * from_um;
        if scaled.is_infinite() && value.is_finite() {
            // Only for values near the f64 limit: scale by the ratio instead.
            return tidy(value * (from_um / to_um));
        }
        tidy(scaled / to_um)
    }

    fn convert_temperature(
        value: f64,
        from: TemperatureUnit,
        to: TemperatureUnit,
    ) -> Result<f64, String> {
        if !value.is_finite() {
            return Err(format!("temperature must be a finite number, got {value}"));
        }
        // Check against absolute zero on the input's own scale, so that exactly absolute zero
        // is never rejected because of rounding.
        let absolute_zero = match from {
            TemperatureUnit::Celsius => -273.15,
            TemperatureUnit::Fahrenheit => -459.67,
            TemperatureUnit::Kelvin => 0.0,
        };
        if value < absolute_zero {
            return Err(format!(
                "{value} {} is below absolute zero ({absolute_zero} {})",
                unit_name(from),
                unit_name(from)
            ));
        }
        if from == to {
            return Ok(value);
        }
        // Pivot through Celsius: the Celsius/Fahrenheit pair (the common case) stays exact.
        let celsius = match from {
            TemperatureUnit::Celsius => value,
            TemperatureUnit::Fahrenheit => (value - 32.0) * 5.0 / 9.0,
            TemperatureUnit::Kelvin => value - 273.15,
        };
        Ok(tidy(match to {
            TemperatureUnit::Celsius => celsius,
            TemperatureUnit::Fahrenheit => celsius * 9.0 / 5.0 + 32.0,
            TemperatureUnit::Kelvin => celsius + 273.15,
        }))
    }
}

export!(Measure);

/// The WIT this component was built from, embedded so the host can show its `///` docs to models.
#[link_section = "toolhost-wit"]
#[used]
static WIT: [u8; include_bytes!("../wit/world.wit").len()] = *include_bytes!("../wit/world.wit");

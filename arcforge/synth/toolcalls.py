"""Procedural function-calling tasks over many distinct function schemas.

A small instruct model learns to call functions from a schema it has never seen only when it
sees many schemas: this module generates them from its own vocabulary (no benchmark's
functions or questions). Domains (finance, geometry, physics, ...) hold objects ("orbital
period", "hotel room", ...); an object has a kind (metric, lookup, search, action, convert)
that decides its verbs, and parameter templates (integer, number, string, string enum,
boolean, array of strings or integers) that are required or optional (an optional one states
its default in its description). A function is one draw of verb x name form x naming style
(`calculate_orbital_period`, `astronomy.estimate_orbit_period`, `astronomy.orbit_period`) x
parameter names x optional parameters, so the name space holds thousands of names.

A task draws concrete argument values, writes a user question that states every value the
call needs (numbers as digits; optional arguments are mentioned, and then called, in about 40%
of tasks) and its gold call(s), in one of five structures:
- simple: one function offered, one call;
- multiple: 2-4 functions from different domains offered, one call to the right one;
- parallel: one function, 2-4 calls with different values, all in one assistant turn;
- parallel_multiple: 2-4 functions, 2-4 calls spanning at least two of them;
- irrelevance: 1-3 functions offered and a question none of them answers: no call, a short
  plain-text reply that the functions cannot help.
Every task is an ABE task (arcforge.envs.abe_env): the offered schemas are its tools, each gold
call has a record with a deterministic result string, and the answer is the results joined;
an irrelevance task requires no call, so a reply without one scores 1. Each task also yields
an SFT record: user, the assistant turn with exactly the gold calls, the tool results and
"Answer: ..." (irrelevance: user and the plain-text reply), with the offered tool schemas.
"""

from __future__ import annotations

import hashlib
import json
import keyword
import random
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from arcforge.errors import UserError
from arcforge.synth.abe import ABESpec, SubQuestion
from arcforge.types import Message, Task, ToolCall, Validation

CATEGORIES = ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance")
P_OPTIONAL = 0.4  # share of tasks whose question (and gold call) sets optional arguments

# ---------------------------------------------------------------- value pools


def _pools(texts: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """Word lists written as "a|b|c" strings."""
    return {k: tuple(v.split("|")) for k, v in texts.items()}


POOLS: dict[str, tuple[str, ...]] = _pools(
    {
        "city": (
            "Lisbon|Oslo|Lima|Nairobi|Osaka|Montreal|Valencia|Krakow|Porto|Hanoi|Quito|Tbilisi|"
            "Adelaide|Bergen|Cusco|Dakar|Edinburgh|Florence|Ghent|Hobart|Izmir|Jaipur|Kyoto|"
            "Leipzig|Malmo|Nantes|Perth|Reykjavik|Seville|Tallinn|Utrecht|Vilnius|Wellington|"
            "Yerevan|Zagreb|Bilbao|Cork|Dresden|Gdansk|Halifax|Lyon|Salzburg|Tampere|Turin|"
            "Sapporo|Busan|Cebu|Durban|Mombasa|Accra|Rosario|Medellin|Curitiba|Denver|Austin|"
            "Portland|Savannah|Boise|Winnipeg|Aarhus|Bologna|Graz|Split|Kaunas"
        ),
        "country": (
            "Portugal|Norway|Peru|Kenya|Japan|Canada|Spain|Poland|Vietnam|Ecuador|Georgia|"
            "Australia|Senegal|Scotland|Italy|Belgium|India|Germany|Sweden|Iceland|Estonia|"
            "Netherlands|Lithuania|New Zealand|Armenia|Croatia|Ireland|Finland|Austria|"
            "South Korea|Philippines|South Africa|Ghana|Argentina|Colombia|Brazil|Chile|Mexico|"
            "Morocco|Denmark"
        ),
        "first": (
            "Amara|Bruno|Chiara|Dmitri|Elena|Farid|Greta|Hiro|Ines|Jonas|Kavya|Lukas|Maya|"
            "Nikolai|Olga|Pedro|Quinn|Rosa|Samir|Tamsin|Uma|Viktor|Wen|Ximena|Yusuf|Zoe|Anika|"
            "Bao|Carmen|Dara|Emeka|Freya|Gideon|Hana|Idris|Julia|Kofi|Leila|Mateo|Nadia"
        ),
        "last": (
            "Okafor|Lindqvist|Moreau|Petrov|Alvarez|Haddad|Novak|Tanaka|Silva|Berg|Iyer|Keller|"
            "Rossi|Volkov|Kowalski|Mendes|Byrne|Castillo|Rahman|Whitfield|Nair|Horvat|Zhou|"
            "Ortega|Demir|Fischer|Mensah|Larsen|Sato|Dubois|Ferreira|Nguyen|Adeyemi|Costa|Jensen|"
            "Kaur|Lopez|Murphy|Popescu|Schmidt"
        ),
        "currency": "USD|EUR|GBP|JPY|CHF|CAD|AUD|NZD|SEK|NOK|DKK|PLN|INR|BRL|MXN|ZAR|KRW|SGD",
        "airport": (
            "LIS|OSL|LIM|NBO|KIX|YUL|VLC|KRK|OPO|HAN|UIO|TBS|ADL|BGO|EDI|FLR|JAI|LEJ|PER|KEF|SVQ|"
            "TLL|VNO|WLG|ZAG|BIO|ORK|DRS|GDN|LYS|SZG|TRN|CTS|PUS|DEN|AUS"
        ),
        "ticker": (
            "ZNTH|QRLX|BRVO|KELP|MOXI|TRIX|VANT|ORBX|LUMN|HALO|PYRA|NIMB|CRST|DELV|FJRD|GLNT|"
            "IRIS|JUNO|KITE|MERL"
        ),
        "product": (
            "trail running shoes|espresso grinder|noise-cancelling headphones|standing desk|"
            "cast iron skillet|mechanical keyboard|yoga mat|electric kettle|hiking backpack|"
            "smart thermostat|air purifier|wireless mouse|rain jacket|camping stove|bike helmet|"
            "desk lamp|water filter pitcher|portable charger|chef's knife|travel pillow|"
            "bluetooth speaker|office chair|sleeping bag|robot vacuum|rice cooker|"
            "fitness tracker|ceramic teapot|winter gloves|laptop stand|french press"
        ),
        "ingredient": (
            "flour|sugar|eggs|butter|milk|garlic|onion|tomatoes|basil|rice|chickpeas|lentils|"
            "spinach|mushrooms|ginger|lemon|honey|oats|yogurt|cheddar|potatoes|carrots|zucchini|"
            "coconut milk|salmon|chicken thighs|tofu|quinoa|black beans|bell peppers|cinnamon|"
            "almonds|feta|cucumber|paprika|cumin"
        ),
        "dish": (
            "mushroom risotto|lentil soup|banana bread|chicken curry|shakshuka|vegetable lasagna|"
            "fish tacos|pumpkin pie|pad thai|beef stew|falafel wraps|apple crumble|miso ramen|"
            "ratatouille|paella|carrot cake|goulash|spinach quiche|sourdough loaf|"
            "chocolate brownies|tomato bruschetta|pea and mint soup|lemon tart|stuffed peppers"
        ),
        "team": (
            "Bergen Falcons|Lisbon Mariners|Krakow Comets|Osaka Tigersharks|Quito Condors|"
            "Halifax Storm|Dresden Lions|Perth Stingrays|Cork Harriers|Austin Ramblers|"
            "Denver Summit|Turin Wolves|Busan Dolphins|Lyon Vipers|Nairobi Cheetahs|"
            "Porto Anchors|Tampere Bears|Winnipeg Blizzard|Medellin Jaguars|Graz Eagles"
        ),
        "artist": (
            "The Lantern Keepers|Mira Solace|Paper Harbor|Coastal Static|Velvet Orchard|"
            "Jonah Reed Trio|Night Bloom|Amber Circuit|Lena Marsh|The Quiet Foxes|"
            "Northern Arcade|Sol Rivera|Glass Meridian|Ivy Kettle|Blue Fathom|Copper Tides|"
            "Rafa Monteiro|Echo Parade|Saffron Skies|The Wandering Hours"
        ),
        "album": (
            "Silver Harbor|Midnight Orchard|Paper Lanterns|Salt and Signal|Northern Lights Motel|"
            "Glass Rivers|Summer in Static|Quiet Machines|Velvet Weather|The Long Drive Home|"
            "Golden Hour Radio|Cinder and Smoke|Open Water|Low Tide Letters|Satellite Hearts|"
            "Winter Market"
        ),
        "song": (
            "Harbor Lights|Slow Comet|Paper Planes at Dawn|Kitchen Radio|Neon Rain|"
            "Long Way North|Honey and Rust|Static Hearts|Last Train to Ghent|Salt Air|"
            "Velvet Morning|Quiet Storm Warning|Orchard Road|Blue Hour|Telescope|"
            "Wildflower Season|Glass Houses|Minor Miracles"
        ),
        "formula": (
            "H2O|NaCl|CO2|C6H12O6|NH3|CH4|H2SO4|CaCO3|C2H5OH|KMnO4|NaHCO3|HCl|MgSO4|Fe2O3|"
            "C8H10N4O2|KNO3|Al2O3|SiO2"
        ),
        "compound": (
            "sodium chloride|potassium nitrate|calcium carbonate|glucose|sodium bicarbonate|"
            "magnesium sulfate|copper sulfate|citric acid|ammonium chloride|potassium iodide|"
            "benzoic acid|urea|sucrose|lithium carbonate"
        ),
        "element": (
            "hydrogen|helium|lithium|carbon|nitrogen|oxygen|fluorine|neon|sodium|magnesium|"
            "aluminium|silicon|phosphorus|sulfur|chlorine|argon|potassium|calcium|titanium|iron|"
            "copper|zinc|silver|tin|tungsten|gold|mercury|lead|uranium"
        ),
        "species": (
            "red fox|snow leopard|monarch butterfly|atlantic puffin|giant otter|koala|"
            "komodo dragon|blue whale|axolotl|emperor penguin|gray wolf|honey bee|"
            "green sea turtle|african elephant|peregrine falcon|red panda|fennec fox|harbor seal|"
            "barn owl|poison dart frog|humpback whale|mountain gorilla|platypus|arctic tern"
        ),
        "planet": "Mercury|Venus|Mars|Jupiter|Saturn|Uranus|Neptune",
        "star": (
            "Sirius|Vega|Betelgeuse|Rigel|Arcturus|Capella|Aldebaran|Antares|Polaris|Deneb|"
            "Altair|Spica|Procyon|Canopus|Fomalhaut|Proxima Centauri|Regulus|Castor"
        ),
        "subject": (
            "data science|organic chemistry|marine biology|macroeconomics|creative writing|"
            "graphic design|linear algebra|art history|machine learning|environmental science|"
            "digital marketing|philosophy|civil engineering|music theory|public health|"
            "astrophysics"
        ),
        "crop": (
            "wheat|maize|barley|soybeans|potatoes|rice|sunflower|canola|sorghum|oats|lentils|"
            "cotton|sugar beet|tomatoes"
        ),
        "movie": (
            "The Glass Orchard|Midnight at Harbor Station|Paper Moons|The Last Cartographer|"
            "Echoes of Tallinn|Salt Road|The Quiet Engineer|Winter Lanterns|A House Made of Rain|"
            "Signal Lost|The Velvet Heist|North of Nowhere|Copper Sky|"
            "The Orchard Keeper's Daughter|Lightyears Apart|The Tin Crown"
        ),
        "cinema": (
            "Rialto Picturehouse|Starlight Cinema|Odeon Riverside|The Lumen|Cine Aurora|"
            "Grand Palace Theatre|Harbor Screens|Moonrise Cinema|Majestic 8|The Projection Room"
        ),
        "book": (
            "The Cartographer's Garden|A Map of Quiet Places|The Salt Archive|"
            "Letters from Bergen|The Glassmaker's Apprentice|Under the Linden Tree|"
            "The Clockwork Harbor|Seven Winters|The Lighthouse Ledger|Notes on a Northern Sky|"
            "The Orchard Year|River of Small Lamps|The Patient Engineer|Stone and Saffron|"
            "The Last Tram to Turin"
        ),
        "branch": (
            "Central Library|Riverside Branch|Oak Hill Branch|Harbor View Branch|"
            "Northgate Branch|Old Town Library|Maple Street Branch|University Branch|"
            "Lakeside Branch|West End Branch"
        ),
        "gamertag": (
            "NovaFox21|PixelRaven|QuietStorm88|LunarDrift|IronWasp|EchoBlade|ByteKnight|"
            "SolarFlare7|CrimsonOwl|GlitchGoblin|FrostByte42|NeonNomad|ShadowPanda|TurboTurtle|"
            "VoidRunner|MossyMage"
        ),
        "game": (
            "Starfall Tactics|Harbor Kingdoms|Neon Drift|Ember Legends|Skyforge Arena|"
            "Quarry Quest|Moonlit Rally|Iron Orchard|Pixel Frontier|Tidebreaker|Crystal Dominion|"
            "Rogue Meridian"
        ),
        "job_title": (
            "data analyst|backend engineer|product designer|nurse practitioner|marketing manager|"
            "civil engineer|sous chef|accountant|UX researcher|electrician|high school teacher|"
            "logistics coordinator|pharmacist|project manager|graphic designer|physiotherapist|"
            "sales representative|devops engineer|copywriter|lab technician"
        ),
        "venue": (
            "Harbor Hall|The Glasshouse|Riverside Pavilion|Old Mill Loft|"
            "Summit Conference Centre|Linden Gardens|The Foundry|Seaview Terrace|Maple Ballroom|"
            "Northlight Studio|Copperleaf Barn|City Atrium"
        ),
        "event": (
            "Harbor Jazz Night|Spring Tech Summit|Autumn Food Festival|Open Studio Weekend|"
            "Lantern Parade|Riverside Book Fair|Winter Makers Market|Design Week Opening|"
            "Night of the Planetarium|Community Chess Open|Summer Film Marathon|"
            "Regional Science Fair"
        ),
        "river": (
            "Tagus|Danube|Rhine|Vistula|Ebro|Elbe|Loire|Shannon|Douro|Po|Daugava|Glomma|Thames|"
            "Neris|Drava"
        ),
        "tree": (
            "oak|beech|Scots pine|silver birch|Norway spruce|sugar maple|red cedar|eucalyptus|"
            "teak|douglas fir|black walnut|white willow"
        ),
        "car_make": (
            "Toyota|Volkswagen|Hyundai|Ford|Skoda|Renault|Kia|Mazda|Volvo|Subaru|Peugeot|Honda"
        ),
        "car_model": (
            "Corolla|Golf|Tucson|Focus|Octavia|Clio|Sportage|CX-5|XC40|Outback|208|Civic|Yaris|"
            "Polo|Kona"
        ),
        "hotel": (
            "Hotel Marisol|The Linden House|Harborview Inn|Casa Alfama|Nordlys Hotel|"
            "The Copper Kettle Inn|Grand Hotel Aurora|Villa Serena|The Old Post Hotel|"
            "Skyline Suites|Pension Rosa|The Fjord Lodge|Hotel Miramar"
        ),
        "stop": (
            "Market Square|Central Station|University Gate|Harbor Road|Old Town Hall|"
            "Riverside Park|Hospital North|Museum Quarter|Airport Terminal|Cathedral Square|"
            "Stadium East|Botanic Garden"
        ),
        "medication": (
            "ibuprofen|paracetamol|amoxicillin|loratadine|omeprazole|metformin|cetirizine|"
            "atorvastatin|lisinopril|sertraline|levothyroxine|amlodipine|naproxen|salbutamol"
        ),
        "pet_name": (
            "Biscuit|Luna|Pepper|Milo|Olive|Captain|Juniper|Mochi|Rocket|Hazel|Noodle|Ziggy|"
            "Clover|Bento"
        ),
        "street": (
            "Harbor Street|Linden Avenue|Mill Lane|Station Road|Oak Crescent|Market Street|"
            "Rose Terrace|Canal Walk|Hill Road|Orchard Way"
        ),
        "region": "North|South|East|West|Central|Coastal|Highlands",
        "meeting": (
            "Quarterly planning|Design review|Budget check-in|Sprint retrospective|"
            "Onboarding session|Client kickoff|Hiring sync|Product demo"
        ),
        "tournament": (
            "Spring Invitational|Harbor Cup|Northern Masters|Winter Open|City Championship|"
            "Summer Clash"
        ),
        "topic": (
            "autumn leaves|a lighthouse|city rain|the first snow|a lost key|morning coffee|"
            "a sleepy cat|the ocean at night"
        ),
    }
)

# ---------------------------------------------------------------- parameter templates

# key | value generator | description | noun phrase ({v}: the value) | prepositional phrase
# ("-": "with " + noun phrase; booleans: the phrase for false) | other names | default
# (an optional parameter states it in its description). Generators: int:lo:hi,
# num:lo:hi:decimals, pick:<pool>, enum:a,b,c, bool, list:<pool> (array of strings),
# ints:lo:hi (array of integers), date, time, code:<pattern> (# digit, @ letter), seq:lo:hi
# (DNA), person, persons, addr.
PARAM_TABLE = """
principal | num:500:90000:2 | Initial amount invested, in US dollars. | a principal of {v} dollars | - | principal_amount initial_deposit | -
annual_rate | num:0.5:12:2 | Nominal annual interest rate as a percentage, e.g. 4.5 for 4.5%. | an annual interest rate of {v}% | at an annual interest rate of {v}% | interest_rate rate_percent | -
years | int:2:40 | Length of the period in whole years. | a period of {v} years | over {v} years | duration_years num_years | -
compounding_frequency | enum:annually,quarterly,monthly,daily | How often interest is added to the balance. | {v} compounding | compounded {v} | compounding frequency | annually
loan_amount | num:1000:250000:2 | Amount borrowed, in US dollars. | a loan of {v} dollars | for a loan of {v} dollars | principal_borrowed amount_borrowed | -
term_months | int:6:360 | Repayment term in months. | a term of {v} months | over {v} months | loan_term_months months | -
down_payment | num:1000:90000:2 | Up-front payment that reduces the amount financed, in US dollars. | a down payment of {v} dollars | - | deposit upfront_payment | 0
initial_cost | num:100:50000:2 | Total amount paid for the investment, in US dollars. | an initial cost of {v} dollars | - | cost_basis amount_invested | -
final_value | num:150:90000:2 | Value of the investment at the end of the holding period, in US dollars. | a final value of {v} dollars | - | end_value current_value | -
holding_years | int:2:30 | Number of years the investment was held, used to annualize the return. | a holding period of {v} years | held for {v} years | years_held period_years | 1
ticker | pick:ticker | Stock ticker symbol of the company. | the ticker {v} | for the ticker {v} | symbol stock_symbol | -
exchange | enum:NASDAQ,NYSE,LSE,TSE,XETRA | Stock exchange to quote from. | the {v} exchange | on the {v} exchange | market stock_exchange | NASDAQ
trade_date | date | Trading day in YYYY-MM-DD format. | the trading day {v} | on {v} | date as_of | the latest trading day
base_currency | pick:currency | ISO 4217 code of the currency being priced. | the base currency {v} | from {v} | from_code base | -
target_currency | pick:currency | ISO 4217 code of the currency to price in. | the target currency {v} | to {v} | to_code quote_currency | -
rate_date | date | Date of the rate in YYYY-MM-DD format. | the date {v} | on {v} | date as_of_date | today
amount | num:5:20000:2 | Amount of money to convert. | {v} | {v} | value sum | -
from_currency | pick:currency | ISO 4217 code of the source currency. | {v} | from {v} | source_currency from_ccy | -
to_currency | pick:currency | ISO 4217 code of the currency to convert into. | {v} | to {v} | destination_currency to_ccy | -
monthly_contribution | num:50:3000:2 | Amount added to the account every month, in US dollars. | a monthly contribution of {v} dollars | contributing {v} dollars a month | contribution monthly_deposit | -
initial_balance | num:500:100000:2 | Balance at the start of the projection, in US dollars. | a starting balance of {v} dollars | - | starting_balance current_savings | 0
annual_income | num:12000:400000:2 | Gross annual income in US dollars. | an annual income of {v} dollars | on an annual income of {v} dollars | income gross_income | -
country | pick:country | Country name in English. | the country {v} | in {v} | country_name nation | -
filing_status | enum:single,married,head_of_household | Tax filing status. | a {v} filing status | filing as {v} | status tax_status | single
fiscal_year | int:2012:2024 | Calendar year to report on. | the year {v} | in {v} | year report_year | -
max_results | int:2:25 | Maximum number of results to return. | at most {v} results | limited to {v} results | limit top_n | 10
radius | num:0.5:80:2 | Radius of the shape. | a radius of {v} | - | r radius_length | -
length_unit | enum:mm,cm,m,in,ft | Unit of the lengths given. | lengths in {v} | measured in {v} | unit units | m
base_length | num:1:120:2 | Length of the base of the triangle. | a base of {v} | - | base b | -
height | num:1:120:2 | Height of the shape. | a height of {v} | - | h height_length | -
side_count | int:3:20 | Number of sides of the polygon. | {v} sides | - | num_sides n_sides | -
side_length | num:0.5:50:2 | Length of one side. | a side length of {v} | - | side edge_length | -
decimal_places | int:0:6 | Number of decimal places to round the result to. | {v} decimal places | rounded to {v} decimal places | precision round_to | 2
leg_a | num:1:90:2 | Length of the first leg. | one leg of {v} | - | side_a a | -
leg_b | num:1:90:2 | Length of the second leg. | another leg of {v} | - | side_b b | -
semi_major | num:5:90:2 | Length of the semi-major axis. | a semi-major axis of {v} | - | a major_semi_axis | -
semi_minor | num:1:4.9:2 | Length of the semi-minor axis. | a semi-minor axis of {v} | - | b minor_semi_axis | -
angle_degrees | num:5:355:1 | Central angle in degrees. | a central angle of {v} degrees | - | angle theta_degrees | -
mass_kg | num:0.2:5000:2 | Mass of the body in kilograms. | a mass of {v} kg | - | mass weight_kg_body | -
velocity_ms | num:0.5:300:2 | Speed of the body in meters per second. | a speed of {v} m/s | moving at {v} m/s | velocity speed | -
initial_speed | num:2:120:2 | Launch speed in meters per second. | a launch speed of {v} m/s | - | speed v0 | -
launch_angle | num:5:85:1 | Launch angle above the horizontal, in degrees. | a launch angle of {v} degrees | at {v} degrees | angle theta | -
gravity | num:1.6:24.8:2 | Gravitational acceleration in m/s^2. | a gravitational acceleration of {v} m/s^2 | - | g gravitational_acceleration | 9.81
drop_height | num:1:800:2 | Height of the drop in meters. | a height of {v} m | from {v} m | height_m fall_height | -
pendulum_length | num:0.1:30:2 | Length of the pendulum in meters. | a length of {v} m | - | length string_length | -
voltage | num:1:400:2 | Voltage across the resistor, in volts. | a voltage of {v} V | - | volts potential_difference | -
resistance | num:0.5:10000:2 | Resistance in ohms. | a resistance of {v} ohms | - | ohms resistance_ohms | -
wavelength_nm | num:100:2000:1 | Wavelength in nanometers. | a wavelength of {v} nm | - | wavelength lambda_nm | -
medium | enum:vacuum,air,water,glass | Medium the wave travels through. | the medium {v} | through {v} | material propagation_medium | vacuum
object_volume | num:0.01:20:2 | Volume of the submerged object in cubic meters. | a volume of {v} cubic meters | - | volume displaced_volume | -
fluid_density | num:600:1400:1 | Density of the fluid in kg per cubic meter. | a fluid density of {v} kg/m^3 | - | density rho | -
radius_m | num:0.5:200:2 | Radius of the circular path in meters. | a radius of {v} m | on a radius of {v} m | radius path_radius | -
energy_value | num:0.5:90000:2 | Amount of energy to convert. | {v} | {v} | value quantity | -
energy_from | enum:joules,calories,kilowatt_hours,electronvolts,btu | Unit of the given value. | {v} | from {v} | from_unit source_unit | -
energy_to | enum:joules,calories,kilowatt_hours,electronvolts,btu | Unit to convert into. | {v} | to {v} | to_unit target_unit | -
city | pick:city | Name of the city, e.g. Lisbon. | the city of {v} | in {v} | location city_name | -
forecast_days | int:2:14 | Number of days to forecast. | {v} days ahead | for the next {v} days | days horizon_days | 1
units | enum:metric,imperial | Unit system of the reply. | {v} units | in {v} units | unit_system measurement | metric
include_humidity | bool | Whether to include relative humidity in the reply. | including the humidity | without the humidity | with_humidity show_humidity | false
pollutant | enum:pm25,pm10,ozone,no2,so2 | Pollutant the index is computed for. | the pollutant {v} | for {v} | pollutant_type measure | pm25
day_date | date | Day in YYYY-MM-DD format. | the date {v} | on {v} | date day | -
month | enum:January,February,March,April,May,June,July,August,September,October,November,December | Month of the year, in English. | the month of {v} | in {v} | month_name period_month | -
year | int:2010:2025 | Calendar year. | the year {v} | in {v} | calendar_year yr | -
severity | enum:minor,moderate,severe,extreme | Lowest severity to include. | at least {v} severity | of at least {v} severity | min_severity level | moderate
temperature_c | num:-30:45:1 | Air temperature in degrees Celsius. | an air temperature of {v} degrees Celsius | at {v} degrees Celsius | temperature air_temp_c | -
humidity_percent | int:5:100 | Relative humidity in percent. | a relative humidity of {v}% | - | humidity relative_humidity | -
wind_speed_kmh | num:2:120:1 | Wind speed in kilometers per hour. | a wind speed of {v} km/h | - | wind_speed wind_kmh | -
origin_airport | pick:airport | IATA code of the departure airport. | the departure airport {v} | from {v} | origin from_airport | -
destination_airport | pick:airport | IATA code of the arrival airport. | the arrival airport {v} | to {v} | destination to_airport | -
departure_date | date | Departure date in YYYY-MM-DD format. | a departure date of {v} | departing on {v} | date outbound_date | -
cabin_class | enum:economy,premium,business,first | Cabin class. | {v} class | in {v} class | cabin travel_class | economy
passengers | int:2:9 | Number of passengers. | {v} passengers | for {v} passengers | num_passengers travelers_count | 1
flight_number | code:@@### | Airline flight number, e.g. TP482. | flight {v} | on flight {v} | flight flight_code | -
passenger_name | person | Full name of the passenger. | the passenger {v} | for {v} | traveler_name name | -
seat_preference | enum:window,aisle,middle | Preferred seat position. | a {v} seat | with a {v} seat | seat seat_type | aisle
check_in_date | date | Check-in date in YYYY-MM-DD format. | a check-in date of {v} | checking in on {v} | check_in arrival_date | -
nights | int:1:21 | Number of nights to stay. | {v} nights | for {v} nights | num_nights length_of_stay | -
max_price_per_night | num:40:900:2 | Highest nightly price in US dollars. | a maximum of {v} dollars per night | under {v} dollars per night | max_price price_cap | no limit
min_rating | num:2.5:4.9:1 | Lowest guest rating on a 1-5 scale. | a rating of at least {v} | rated at least {v} | rating_min minimum_rating | 3.0
hotel_name | pick:hotel | Name of the hotel. | the hotel {v} | at {v} | hotel property_name | -
room_type | enum:single,double,twin,suite | Type of room. | a {v} room | - | room bed_type | double
citizenship | pick:country | Country of the traveler's passport. | a passport from {v} | for citizens of {v} | nationality passport_country | -
destination_country | pick:country | Country being visited. | the destination {v} | visiting {v} | destination visiting_country | -
trip_purpose | enum:tourism,business,study,transit | Purpose of the trip. | a {v} trip | for {v} | purpose visit_type | tourism
attraction_category | enum:museum,park,landmark,market,gallery | Kind of attraction. | the category {v} | of the category {v} | category kind | landmark
trip_days | int:2:30 | Length of the trip in days. | {v} days | for {v} days | days duration_days | -
travelers | int:1:8 | Number of travelers. | {v} travelers | for {v} travelers | num_travelers party_size | -
comfort_level | enum:budget,standard,luxury | Spending level for lodging and meals. | a {v} comfort level | on a {v} budget | style tier | standard
pickup_city | pick:city | City where the car is picked up. | pickup in {v} | picked up in {v} | pickup_location city | -
pickup_date | date | Pickup date in YYYY-MM-DD format. | a pickup date of {v} | on {v} | start_date date | -
rental_days | int:1:30 | Number of rental days. | {v} rental days | for {v} days | days duration | -
car_class | enum:economy,compact,suv,van,convertible | Vehicle class. | a {v} car | - | vehicle_class category | compact
ingredients | list:ingredient | Ingredients the recipe must use. | the ingredients {v} | using {v} | ingredient_list items | -
cuisine | enum:italian,mexican,indian,japanese,french,thai,greek,moroccan | Cuisine style. | {v} cuisine | in {v} style | cuisine_type style | any cuisine
max_prep_minutes | int:10:180 | Longest preparation time in minutes. | at most {v} minutes of preparation | ready in under {v} minutes | max_time prep_time_limit | no limit
dish | pick:dish | Name of the dish. | the dish {v} | for {v} | recipe recipe_name | -
servings | int:2:12 | Number of servings. | {v} servings | for {v} servings | portions serving_count | 1
quantity | num:0.5:40:2 | Amount to convert. | {v} | {v} | amount value | -
measure_from | enum:cups,tablespoons,teaspoons,grams,milliliters,ounces | Unit of the given amount. | {v} | {v} | from_unit source_unit | -
measure_to | enum:cups,tablespoons,teaspoons,grams,milliliters,ounces | Unit to convert into. | {v} | to {v} | to_unit target_unit | -
original_servings | int:1:8 | Number of servings the recipe is written for. | an original yield of {v} servings | from {v} servings | base_servings recipe_servings | -
target_servings | int:9:40 | Number of servings wanted. | {v} target servings | to {v} servings | desired_servings new_servings | -
oven_temperature_c | int:140:260 | Oven temperature in degrees Celsius. | an oven temperature of {v} degrees Celsius | at {v} degrees Celsius | temperature oven_temp | -
altitude_m | int:500:4000 | Altitude of the kitchen in meters. | an altitude of {v} m | at an altitude of {v} m | altitude elevation_m | 0
ingredient | pick:ingredient | Ingredient to replace. | the ingredient {v} | for {v} | item food | -
diet | enum:vegan,vegetarian,gluten_free,dairy_free,keto | Dietary restriction to respect. | a {v} diet | suitable for a {v} diet | dietary_restriction diet_type | none
drink_type | enum:wine,beer,tea,cocktail,mocktail | Kind of drink to pair. | {v} | with {v} | beverage drink | wine
plan_days | int:2:14 | Number of days to plan. | {v} days | for {v} days | days num_days | -
daily_calories | int:1200:3500 | Calorie target per day. | a target of {v} calories a day | at {v} calories per day | calories calorie_target | -
team_name | pick:team | Name of the team. | the team {v} | for the {v} | team club | -
season | int:2012:2024 | Season, given by the year it started. | the {v} season | in the {v} season | season_year year | -
player_name | person | Full name of the player. | the player {v} | for {v} | player athlete | -
stat_type | enum:points,assists,rebounds,goals,saves | Statistic to report. | {v} | for {v} | statistic metric | points
home_team | pick:team | Name of the home team. | the home team {v} | hosted by {v} | home host_team | -
away_team | pick:team | Name of the away team. | the away team {v} | against {v} | away visiting_team | -
match_date | date | Date of the match in YYYY-MM-DD format. | a match date of {v} | played on {v} | date game_date | -
wins | int:0:82 | Number of games won. | {v} wins | - | won games_won | -
losses | int:0:82 | Number of games lost. | {v} losses | - | lost games_lost | -
ties | int:1:20 | Number of games tied. | {v} ties | - | draws games_tied | 0
coach_name | person | Full name of the coach. | the coach {v} | with {v} | coach trainer | -
session_date | date | Date of the session in YYYY-MM-DD format. | a session date of {v} | on {v} | date day | -
session_time | time | Start time in 24-hour HH:MM format. | a start time of {v} | at {v} | time start_time | -
duration_minutes | int:20:180 | Length in minutes. | a duration of {v} minutes | lasting {v} minutes | duration length_minutes | 60
distance_km | num:1:900:2 | Distance in kilometers. | a distance of {v} km | over {v} km | distance kilometers | -
finish_minutes | num:10:300:1 | Finishing time in minutes. | a finishing time of {v} minutes | in {v} minutes | time_minutes total_minutes | -
artist_name | pick:artist | Name of the artist or band. | the artist {v} | by {v} | artist band | -
genre | enum:rock,jazz,pop,folk,electronic,classical,hip_hop | Music genre. | the genre {v} | in the {v} genre | music_genre style | all genres
album_title | pick:album | Title of the album. | the album {v} | for the album {v} | album title | -
playlist_name | pick:album | Name of the new playlist. | the name {v} | called {v} | name title | -
songs | list:song | Song titles to add, in order. | the songs {v} | with the songs {v} | tracks track_titles | -
is_public | bool | Whether the playlist is visible to everyone. | made public | kept private | public visibility_public | false
city_filter | pick:city | Only list events in this city. | the city {v} | in {v} | city location | all cities
note_name | enum:C,D,E,F,G,A,B | Note letter. | the note {v} | for the note {v} | note pitch_class | -
octave | int:0:8 | Octave number in scientific pitch notation. | octave {v} | in octave {v} | octave_number register | -
tuning_hz | num:415:466:1 | Frequency of A4 in hertz. | an A4 tuning of {v} Hz | - | a4_hz reference_pitch | 440.0
language | enum:en,fr,de,es,pt,ja | Language of the reply. | the language {v} | in the language {v} | lang locale | en
formula | pick:formula | Chemical formula, e.g. H2O. | the formula {v} | for {v} | chemical_formula compound_formula | -
solute_moles | num:0.01:20:2 | Amount of solute in moles. | {v} moles of solute | - | moles amount_mol | -
solution_liters | num:0.05:50:2 | Volume of the solution in liters. | a volume of {v} L | in {v} L | volume_l volume | -
acid_molarity | num:0.01:0.99:2 | Concentration of the acid in mol/L. | a concentration of {v} mol/L | at {v} mol/L | concentration molarity | -
solution_temperature_c | num:0.5:99:1 | Temperature of the solution in degrees Celsius. | a temperature of {v} degrees Celsius | at {v} degrees Celsius | temperature temp_c | 25
gas_moles | num:0.1:50:2 | Amount of gas in moles. | {v} moles of gas | - | moles n | -
temperature_k | num:150:900:1 | Temperature in kelvin. | a temperature of {v} K | at {v} K | temperature t_kelvin | -
gas_liters | num:0.5:500:2 | Volume of the container in liters. | a volume of {v} L | in {v} L | volume v_liters | -
element | pick:element | Name of the element, e.g. carbon. | the element {v} | for {v} | element_name name | -
element_property | enum:atomic_mass,electronegativity,melting_point,density | Property to return. | the property {v} | - | property field | atomic_mass
actual_yield_g | num:1:44:2 | Mass of product obtained, in grams. | an actual yield of {v} g | - | actual_yield obtained_g | -
theoretical_yield_g | num:45:90:2 | Mass of product expected, in grams. | a theoretical yield of {v} g | - | theoretical_yield expected_g | -
initial_mass_g | num:1:1000:2 | Starting mass of the sample in grams. | an initial mass of {v} g | - | initial_mass start_mass | -
half_life_years | num:0.5:5000:1 | Half-life of the isotope in years. | a half-life of {v} years | - | half_life t_half | -
elapsed_years | num:0.5:10000:1 | Time elapsed in years. | {v} years elapsed | after {v} years | time_years elapsed | -
compound | pick:compound | Name of the compound. | the compound {v} | for {v} | substance compound_name | -
solvent | enum:water,ethanol,acetone,methanol | Solvent. | the solvent {v} | in {v} | solvent_name medium | -
species | pick:species | Common name of the species. | the species {v} | for the {v} | species_name animal | -
include_habitat | bool | Whether to describe the habitat too. | including its habitat | without its habitat | with_habitat habitat_details | false
initial_population | int:10:100000 | Population at the start. | an initial population of {v} | starting from {v} individuals | start_population n0 | -
growth_rate | num:0.01:0.95:2 | Growth rate per year as a fraction, e.g. 0.05. | a growth rate of {v} per year | growing at {v} per year | rate r | -
dna_sequence | seq:12:24 | DNA sequence written with the letters A, C, G and T. | the sequence {v} | for the sequence {v} | sequence dna | -
initial_cells | int:100:5000 | Cell count at the start. | {v} cells at the start | starting from {v} cells | start_count n0 | -
final_cells | int:6000:900000 | Cell count at the end. | {v} cells at the end | ending at {v} cells | end_count n1 | -
elapsed_hours | num:1:96:1 | Time between the two counts, in hours. | {v} hours | over {v} hours | hours duration_hours | -
habitat | enum:forest,wetland,desert,grassland,reef,tundra | Habitat type. | the {v} habitat | living in {v} | habitat_type biome | -
dominant_allele_frequency | num:0.05:0.95:2 | Frequency of the dominant allele, between 0 and 1. | a dominant allele frequency of {v} | - | p allele_p | -
package_weight_kg | num:0.1:70:2 | Weight of the parcel in kilograms. | a parcel weighing {v} kg | for a parcel of {v} kg | weight weight_kg | -
origin_city | pick:city | City of origin. | the origin city {v} | from {v} | origin from_city | -
destination_city | pick:city | Destination city. | the destination city {v} | to {v} | destination to_city | -
service_level | enum:standard,express,overnight,economy | Delivery speed. | {v} service | by {v} service | service speed | standard
tracking_number | code:TRK-######## | Tracking number of the shipment. | the tracking number {v} | for tracking number {v} | tracking_id shipment_id | -
pickup_address | addr | Street address for the pickup. | the address {v} | at {v} | address location | -
time_window | enum:morning,afternoon,evening | Pickup time window. | a {v} window | in the {v} | window slot | morning
min_capacity_m2 | int:200:20000 | Lowest storage area in square meters. | at least {v} square meters | with at least {v} square meters | min_area capacity | 0
fuel_consumption | num:3.5:25:1 | Fuel consumption in liters per 100 km. | a consumption of {v} L/100 km | - | consumption liters_per_100km | -
fuel_price | num:0.8:2.9:2 | Price of fuel per liter in US dollars. | a fuel price of {v} dollars per liter | at {v} dollars per liter | price_per_liter fuel_cost | -
customer_name | person | Full name of the customer. | the customer {v} | for {v} | customer client_name | -
shipment_state | enum:pending,in_transit,delivered,returned | Only list shipments in this state. | the state {v} | that are {v} | status state | in_transit
box_count | int:10:5000 | Number of boxes to ship. | {v} boxes | for {v} boxes | boxes num_boxes | -
boxes_per_pallet | int:10:80 | Boxes that fit on one pallet. | {v} boxes per pallet | - | per_pallet pallet_capacity | -
search_query | pick:product | Free-text product search. | the query {v} | for {v} | query keywords | -
max_price | num:5:2000:2 | Highest price in US dollars. | a maximum price of {v} dollars | under {v} dollars | price_max budget | no limit
sort_by | enum:price,rating,newest,popularity | Sort order of the results. | sorted by {v} | sorted by {v} | order sort | rating
product_sku | code:SKU-##### | Stock keeping unit of the product. | the product {v} | for product {v} | sku product_id | -
store_city | pick:city | City of the store. | the store in {v} | at the store in {v} | city store_location | -
item_count | int:1:50 | Number of units to order. | {v} units | - | quantity units | -
gift_wrap | bool | Whether to gift-wrap the order. | gift-wrapped | without gift wrapping | wrap is_gift | false
original_price | num:5:3000:2 | Price before the discount, in US dollars. | an original price of {v} dollars | priced at {v} dollars | price list_price | -
discount_percent | num:5:80:1 | Discount in percent. | a discount of {v}% | - | discount percent_off | -
order_id | code:ORD-###### | Identifier of the order. | the order {v} | for order {v} | order order_number | -
return_reason | enum:damaged,wrong_item,not_needed,too_small,too_large | Reason for the return. | the reason {v} | because it is {v} | reason cause | -
open_now | bool | Only list stores open at the moment. | open right now | whether or not they are open now | currently_open only_open | false
min_stars | int:2:5 | Lowest star rating of the reviews. | at least {v} stars | with at least {v} stars | stars rating_min | 1
weight_kg | num:3:180:1 | Body weight in kilograms. | a weight of {v} kg | - | weight body_weight | -
height_m | num:1.2:2.1:2 | Height in meters. | a height of {v} m | - | height stature_m | -
height_cm | int:120:210 | Height in centimeters. | a height of {v} cm | - | height stature_cm | -
age_years | int:16:90 | Age in years. | an age of {v} | aged {v} | age years_old | -
sex | enum:female,male | Sex used by the formula. | {v} | for a {v} | gender biological_sex | -
activity_level | enum:sedentary,light,moderate,active,athlete | Usual activity level. | a {v} activity level | with a {v} activity level | activity lifestyle | moderate
intensity | enum:low,moderate,high | Exercise intensity zone. | {v} intensity | at {v} intensity | zone effort | moderate
activity_minutes | int:10:240 | Minutes of exercise per day. | {v} minutes of exercise a day | - | exercise_minutes minutes_active | 0
specialty | enum:cardiology,dermatology,pediatrics,orthopedics,general_practice | Medical specialty. | the specialty {v} | specializing in {v} | department field | -
doctor_name | person | Full name of the doctor. | the doctor {v} | with Dr. {v} | doctor physician | -
appointment_date | date | Date of the appointment in YYYY-MM-DD format. | an appointment date of {v} | on {v} | date day | -
appointment_time | time | Time of the appointment in 24-hour HH:MM format. | a time of {v} | at {v} | time slot | -
visit_reason | enum:checkup,follow_up,vaccination,consultation | Reason for the visit. | the reason {v} | for a {v} | reason purpose | checkup
medications | list:medication | Names of the medications to check together. | the medications {v} | between {v} | drugs medication_list | -
medication | pick:medication | Name of the medication. | the medication {v} | of {v} | drug drug_name | -
doses_per_day | int:2:4 | Number of doses a day. | {v} doses a day | split into {v} doses a day | frequency daily_doses | 1
semi_major_axis_au | num:0.1:60:2 | Semi-major axis of the orbit in astronomical units. | a semi-major axis of {v} AU | - | semi_major_axis distance_au_orbit | -
star_mass_solar | num:0.1:9.9:2 | Mass of the central star in solar masses. | a star of {v} solar masses | around a star of {v} solar masses | central_mass star_mass | 1.0
planet | pick:planet | Name of the planet. | the planet {v} | for {v} | planet_name body | -
observation_date | date | Date of the observation in YYYY-MM-DD format. | the date {v} | on {v} | date night | -
observer_city | pick:city | City of the observer. | an observer in {v} | as seen from {v} | location city | Greenwich
star | pick:star | Name of the star. | the star {v} | for {v} | star_name target | -
star_property | enum:distance,luminosity,spectral_type,magnitude | Property to return. | the property {v} | - | property field | distance
planet_mass_earths | num:0.05:300:2 | Mass of the planet in Earth masses. | a mass of {v} Earth masses | - | mass_earths mass | -
planet_radius_km | num:1000:70000:1 | Radius of the planet in kilometers. | a radius of {v} km | - | radius_km radius | -
distance_au | num:0.1:90:2 | Distance in astronomical units. | a distance of {v} AU | over {v} AU | distance au | -
hemisphere | enum:northern,southern | Hemisphere of the observer. | the {v} hemisphere | from the {v} hemisphere | observer_hemisphere region | northern
focal_length_mm | int:300:3000 | Focal length of the telescope in millimeters. | a telescope focal length of {v} mm | - | telescope_focal_length focal_length | -
eyepiece_mm | num:3:40:1 | Focal length of the eyepiece in millimeters. | an eyepiece of {v} mm | with a {v} mm eyepiece | eyepiece_focal_length eyepiece | -
eclipse_type | enum:solar,lunar | Kind of eclipse. | {v} eclipses | - | type kind | -
course_scores | ints:50:100 | Scores of the courses on a 100-point scale. | the scores {v} | for the scores {v} | scores grades | -
grading_scale | enum:four_point,ten_point,hundred_point | Scale of the result. | the {v} scale | on the {v} scale | scale output_scale | four_point
subject | pick:subject | Subject area. | the subject {v} | in {v} | topic field | -
course_level | enum:beginner,intermediate,advanced | Difficulty level. | {v} level | at {v} level | level difficulty | beginner
max_weeks | int:2:20 | Longest course length in weeks. | at most {v} weeks | lasting at most {v} weeks | duration_weeks weeks_max | no limit
student_name | person | Full name of the student. | the student {v} | for {v} | student name | -
course_code | code:@@@-### | Course code, e.g. BIO-204. | the course {v} | for course {v} | course course_id | -
semester | enum:spring,summer,fall | Semester. | the {v} semester | in the {v} semester | term session | fall
coursework_score | num:40:100:1 | Coursework score out of 100. | a coursework score of {v} | - | coursework homework_score | -
exam_score | num:30:100:1 | Exam score out of 100. | an exam score of {v} | - | exam final_exam | -
exam_weight | num:0.2:0.8:2 | Weight of the exam in the final grade, between 0 and 1. | an exam weight of {v} | - | weight exam_share | -
credits | int:3:40 | Number of course credits. | {v} credits | for {v} credits | credit_hours load | -
weeks | int:4:20 | Number of weeks in the term. | {v} weeks | over {v} weeks | term_weeks duration_weeks | -
min_award | int:500:20000 | Lowest award in US dollars. | at least {v} dollars | worth at least {v} dollars | min_amount award_min | 0
bedrooms | int:1:6 | Number of bedrooms. | {v} bedrooms | with {v} bedrooms | rooms num_bedrooms | -
max_price_total | int:80000:3000000 | Highest asking price in US dollars. | a maximum price of {v} dollars | under {v} dollars | price_max budget | no limit
property_type | enum:apartment,house,townhouse,studio | Kind of property. | the type {v} | of type {v} | type home_type | apartment
home_price | num:50000:2000000:2 | Purchase price of the home in US dollars. | a home price of {v} dollars | for a home costing {v} dollars | price purchase_price | -
term_years | int:5:40 | Mortgage term in years. | a term of {v} years | over {v} years | years loan_term | -
floor_area_m2 | int:25:450 | Floor area in square meters. | {v} square meters | of {v} square meters | area size_m2 | -
year_built | int:1900:2024 | Year the home was built. | built in {v} | built in {v} | construction_year built | unknown
annual_rent | num:3000:90000:2 | Yearly rent in US dollars. | an annual rent of {v} dollars | - | rent yearly_rent | -
property_price | num:40000:3000000:2 | Price of the property in US dollars. | a property price of {v} dollars | - | price value | -
listing_id | code:LST-##### | Identifier of the listing. | the listing {v} | for listing {v} | listing property_id | -
viewing_date | date | Date of the viewing in YYYY-MM-DD format. | a viewing date of {v} | on {v} | date day | -
viewing_time | time | Time of the viewing in 24-hour HH:MM format. | a time of {v} | at {v} | time slot | -
neighborhood_metric | enum:crime_rate,school_rating,walkability,noise | Metric to report. | the metric {v} | - | metric indicator | walkability
panel_area_m2 | num:1:400:1 | Total panel area in square meters. | a panel area of {v} square meters | - | area area_m2 | -
panel_efficiency | num:0.12:0.24:2 | Panel efficiency as a fraction, e.g. 0.2. | an efficiency of {v} | - | efficiency eta | -
sun_hours | num:1:10:1 | Peak sun hours per day. | {v} peak sun hours | with {v} peak sun hours a day | peak_sun_hours insolation_hours | -
kwh_used | num:10:3000:1 | Energy used in kilowatt-hours. | {v} kWh used | for {v} kWh | usage_kwh consumption | -
price_per_kwh | num:0.05:0.6:2 | Price per kilowatt-hour in US dollars. | a price of {v} dollars per kWh | at {v} dollars per kWh | rate unit_price | -
fixed_fee | num:2:40:2 | Fixed monthly fee in US dollars. | a fixed fee of {v} dollars | plus a fixed fee of {v} dollars | standing_charge base_fee | 0
power_watts | int:5:3500 | Power draw of the appliance in watts. | a power draw of {v} W | drawing {v} W | watts power | -
hours_per_day | num:0.5:24:1 | Hours of use per day. | {v} hours of use a day | used {v} hours a day | daily_hours usage_hours | -
period_days | int:2:365 | Number of days in the period. | a period of {v} days | over {v} days | days duration_days | 30
fuel_type | enum:petrol,diesel,electric,hybrid,lpg | Fuel or drive type. | a {v} car | in a {v} car | fuel powertrain | -
passengers_count | int:2:7 | Number of people sharing the trip. | {v} people sharing | shared by {v} people | occupants riders | 1
battery_wh | num:10:20000:1 | Battery capacity in watt-hours. | a capacity of {v} Wh | - | capacity_wh capacity | -
load_watts | num:1:5000:1 | Constant load in watts. | a load of {v} W | powering {v} W | load power_draw | -
rotor_diameter_m | num:2:160:1 | Rotor diameter in meters. | a rotor diameter of {v} m | - | diameter rotor_m | -
wind_speed_ms | num:1:25:1 | Wind speed in meters per second. | a wind speed of {v} m/s | at {v} m/s | wind_speed speed_ms | -
air_density | num:0.9:1.4:2 | Air density in kg per cubic meter. | an air density of {v} kg/m^3 | - | rho density | 1.225
connector_type | enum:type2,ccs,chademo,tesla | Plug type. | the connector {v} | with {v} connectors | plug connector | ccs
crop | pick:crop | Name of the crop. | the crop {v} | for {v} | crop_name plant | -
field_hectares | num:0.5:900:1 | Field area in hectares. | a field of {v} hectares | on {v} hectares | area_ha hectares | -
irrigated | bool | Whether the field is irrigated. | with irrigation | without irrigation | irrigation is_irrigated | false
soil_nitrogen_ppm | num:2:80:1 | Nitrogen already in the soil, in ppm. | a soil nitrogen level of {v} ppm | - | soil_n nitrogen_ppm | -
market | enum:chicago,rotterdam,paris,sydney | Commodity market to quote. | the {v} market | on the {v} market | exchange market_name | chicago
livestock | enum:cattle,sheep,goats,pigs,chickens | Kind of animal. | {v} | of {v} | animal animal_type | -
herd_size | int:5:5000 | Number of animals. | a herd of {v} | for a herd of {v} | head_count count | -
travel_date | date | Date of travel in YYYY-MM-DD format. | a travel date of {v} | on {v} | date journey_date | -
depart_after | time | Earliest departure time in 24-hour HH:MM format. | departures after {v} | leaving after {v} | earliest_departure after | 00:00
route_number | int:1:250 | Bus route number. | route {v} | for route {v} | route line | -
stop_name | pick:stop | Name of the stop. | the stop {v} | at {v} | stop station | -
zones | int:1:9 | Number of fare zones crossed. | {v} zones | across {v} zones | fare_zones zone_count | -
passenger_type | enum:adult,child,senior,student | Fare category. | a {v} fare | for a {v} | category fare_type | -
train_number | code:IC ### | Train number, e.g. IC 523. | train {v} | on train {v} | train train_id | -
seat_class | enum:first,second | Seat class. | {v} class | in {v} class | travel_class fare_class | second
transit_mode | enum:bus,tram,metro,ferry,rail | Mode of transport. | the {v} | by {v} | mode line_type | all modes
origin_stop | pick:stop | Stop where the trip starts. | the origin stop {v} | from {v} | from_stop start | -
destination_stop | pick:stop | Stop where the trip ends. | the destination stop {v} | to {v} | to_stop end | -
movie_title | pick:movie | Title of the movie. | the movie {v} | for {v} | title film | -
show_date | date | Date of the screening in YYYY-MM-DD format. | the date {v} | on {v} | date day | today
include_cast | bool | Whether to list the main cast. | including the cast | without the cast | with_cast cast | false
cinema_name | pick:cinema | Name of the cinema. | the cinema {v} | at {v} | cinema theater | -
show_time | time | Start time of the screening in 24-hour HH:MM format. | the {v} showing | for the {v} showing | time showtime | -
ticket_count | int:1:10 | Number of tickets. | {v} tickets | - | tickets quantity | -
film_genre | enum:comedy,drama,thriller,documentary,animation,horror | Film genre. | the genre {v} | in the {v} genre | genre category | -
release_year | int:1990:2025 | Release year. | the year {v} | released in {v} | year released | -
min_score | num:5:9.5:1 | Lowest audience score on a 1-10 scale. | a score of at least {v} | scoring at least {v} | rating_min min_rating | 0
market_region | enum:domestic,international,worldwide | Market of the gross. | the {v} market | in the {v} market | region market | worldwide
author_name | person | Full name of the author. | the author {v} | by {v} | author writer | -
published_after | int:1950:2024 | Only books published after this year. | published after {v} | published after {v} | since_year after_year | 0
book_title | pick:book | Title of the book. | the book {v} | for {v} | title book | -
branch | pick:branch | Library branch. | the branch {v} | at {v} | library_branch location | -
member_id | code:MEM-##### | Library card number of the member. | the member {v} | for member {v} | card_number patron_id | -
pickup_branch | pick:branch | Branch where the book will be picked up. | pickup at {v} | for pickup at {v} | pickup_location collect_at | the member's home branch
page_count | int:40:1200 | Number of pages. | {v} pages | with {v} pages | pages length_pages | -
words_per_minute | int:120:500 | Reading speed in words per minute. | {v} words per minute | at {v} words per minute | wpm reading_speed | 250
days_overdue | int:1:120 | Days past the due date. | {v} days overdue | - | overdue_days days_late | -
daily_fine | num:0.05:2:2 | Fine per day in US dollars. | a daily fine of {v} dollars | at {v} dollars per day | rate_per_day fine_per_day | -
isbn | code:978-#-####-####-# | ISBN-13 of the book. | the ISBN {v} | for ISBN {v} | isbn13 book_isbn | -
gamer_tag | pick:gamertag | Player's gamer tag. | the player {v} | for {v} | player username | -
game_mode | enum:solo,duo,squad,ranked | Game mode. | the {v} mode | in {v} mode | mode queue | -
server_region | enum:eu_west,us_east,us_west,asia,oceania | Server region. | the region {v} | in {v} | region location | -
max_ping | int:20:200 | Highest ping in milliseconds. | a ping under {v} ms | with a ping under {v} ms | ping_max latency_ms | 100
current_level | int:1:40 | Current level. | level {v} | from level {v} | level_now start_level | -
target_level | int:41:99 | Level to reach. | level {v} as the goal | to level {v} | goal_level end_level | -
squad_name | pick:gamertag | Name of the team. | the team {v} | for the team {v} | team team_name | -
tournament_name | pick:tournament | Name of the tournament. | the tournament {v} | in the {v} | tournament event | -
player_rating | int:800:2800 | Elo rating of the player. | a rating of {v} | - | rating elo | -
opponent_rating | int:800:2800 | Elo rating of the opponent. | an opponent rated {v} | against an opponent rated {v} | opponent_elo rival_rating | -
game_title | pick:game | Title of the game. | the game {v} | for {v} | game title | -
game_version | code:#.#.# | Version of the game, e.g. 1.4.2. | version {v} | for version {v} | version patch | -
job_title | pick:job_title | Job title to search for. | the role {v} | for {v} roles | title role | -
remote_only | bool | Only list remote jobs. | remote only | including on-site jobs | remote is_remote | false
min_salary | int:20000:250000 | Lowest yearly salary in US dollars. | at least {v} dollars a year | paying at least {v} dollars a year | salary_min minimum_salary | 0
gross_salary | num:15000:400000:2 | Gross yearly salary in US dollars. | a gross salary of {v} dollars | on a gross salary of {v} dollars | salary gross_pay | -
hourly_rate | num:8:150:2 | Regular hourly pay in US dollars. | an hourly rate of {v} dollars | at {v} dollars an hour | rate pay_rate | -
overtime_hours | num:1:60:1 | Overtime hours worked. | {v} overtime hours | for {v} overtime hours | hours extra_hours | -
overtime_multiplier | num:1.25:3:2 | Pay multiplier for overtime hours. | a multiplier of {v} | at {v} times the rate | multiplier rate_factor | 1.5
candidate_name | person | Full name of the candidate. | the candidate {v} | with {v} | candidate applicant | -
interview_date | date | Date of the interview in YYYY-MM-DD format. | an interview date of {v} | on {v} | date day | -
interview_time | time | Time of the interview in 24-hour HH:MM format. | a time of {v} | at {v} | time slot | -
interviewer_name | person | Full name of the interviewer. | the interviewer {v} | led by {v} | interviewer panel_lead | the hiring manager
employee_id | code:EMP-#### | Employee identifier. | the employee {v} | for employee {v} | employee staff_id | -
leave_type | enum:vacation,sick,parental,unpaid | Kind of leave. | {v} leave | for {v} leave | type category | vacation
department | enum:engineering,sales,marketing,finance,operations,support | Department. | the {v} department | in the {v} department | team dept | -
event_date | date | Date of the event in YYYY-MM-DD format. | the date {v} | on {v} | date day | -
event_category | enum:concert,festival,conference,exhibition,market | Kind of event. | the category {v} | of the category {v} | category type | all categories
venue_name | pick:venue | Name of the venue. | the venue {v} | at {v} | venue location | -
guest_count | int:10:800 | Number of guests. | {v} guests | for {v} guests | guests attendees_count | -
price_per_guest | num:8:250:2 | Price per guest in US dollars. | {v} dollars per guest | at {v} dollars per guest | per_person_price cost_per_guest | -
service_fee_percent | num:5:25:1 | Service fee in percent. | a service fee of {v}% | plus a service fee of {v}% | service_fee fee_percent | 0
meeting_title | pick:meeting | Title of the meeting. | the title {v} | called {v} | title subject | -
meeting_date | date | Date of the meeting in YYYY-MM-DD format. | the date {v} | on {v} | date day | -
start_time | time | Start time in 24-hour HH:MM format. | a start time of {v} | at {v} | time begins_at | -
attendees | persons | Full names of the people to invite. | the attendees {v} | with {v} | participants invitees | -
meeting_minutes | int:15:240 | Length of the meeting in minutes. | a length of {v} minutes | lasting {v} minutes | duration length | 30
event_name | pick:event | Name of the event. | the event {v} | for {v} | event title | -
recipients | persons | Full names of the people to invite. | the guests {v} | to {v} | invitees guests | -
tree_count | int:10:100000 | Number of trees planted. | {v} trees | - | trees count | -
tree_species | pick:tree | Tree species. | the species {v} | of the species {v} | species kind | -
river | pick:river | Name of the river. | the river {v} | for the {v} | river_name waterway | -
water_parameter | enum:nitrate,phosphate,dissolved_oxygen,turbidity | Measured parameter. | the parameter {v} | for {v} | parameter measure | dissolved_oxygen
recycled_tonnes | num:10:49000:1 | Waste recycled, in tonnes. | {v} tonnes recycled | - | recycled recycled_t | -
total_waste_tonnes | num:50000:900000:1 | Total waste collected, in tonnes. | {v} tonnes of total waste | - | total_waste waste_t | -
min_area_km2 | int:10:50000 | Lowest area in square kilometers. | at least {v} square kilometers | covering at least {v} square kilometers | min_area area_min | 0
numbers | ints:1:500 | The data values. | the numbers {v} | for the numbers {v} | values data | -
sample | bool | Whether the data is a sample (divide by n - 1) rather than a population. | treating the data as a sample | treating the data as the whole population | is_sample sample_mode | true
small_integer | int:2:20 | Non-negative integer. | {v} | of {v} | n number | -
first_integer | int:2:5000 | First integer. | {v} | of {v} | a x | -
second_integer | int:2:5000 | Second integer. | {v} | and {v} | b y | -
trials | int:10:40 | Number of independent trials. | {v} trials | in {v} trials | n n_trials | -
successes | int:1:9 | Number of successes. | {v} successes | - | k n_successes | -
success_probability | num:0.05:0.95:2 | Probability of success on one trial. | a success probability of {v} | - | p probability | -
percentile_rank | int:1:99 | Percentile to compute, from 1 to 99. | the {v}th percentile | - | q percentile_value | -
integer_value | int:2:100000 | Integer to convert, in decimal. | {v} | {v} | number value | -
target_base | enum:binary,octal,hexadecimal | Numeral base to convert into. | {v} | to {v} | base to_base | -
fuel_liters | num:1:120:2 | Fuel used in liters. | {v} liters of fuel | using {v} liters of fuel | liters fuel_used | -
car_make | pick:car_make | Manufacturer. | the make {v} | - | make brand | -
car_model | pick:car_model | Model name. | the model {v} | - | model model_name | -
model_year | int:2005:2025 | Model year. | the model year {v} | from {v} | year production_year | -
license_plate | code:@@-#### | License plate of the vehicle. | the plate {v} | for the car with plate {v} | plate registration | -
service_type | enum:oil_change,tire_rotation,inspection,brake_check | Kind of service. | a {v} | for a {v} | service job | -
purchase_price | num:3000:150000:2 | Price paid for the vehicle in US dollars. | a purchase price of {v} dollars | bought for {v} dollars | price cost | -
vehicle_age_years | int:1:25 | Age of the vehicle in years. | an age of {v} years | after {v} years | age years | -
depreciation_rate | num:5:35:1 | Yearly depreciation in percent. | a yearly depreciation of {v}% | at {v}% a year | rate annual_rate | 15
speed_kmh | int:20:200 | Speed in kilometers per hour. | a speed of {v} km/h | at {v} km/h | speed velocity_kmh | -
road_condition | enum:dry,wet,icy,snowy | Road surface. | a {v} road | on a {v} road | surface condition | dry
pet_type | enum:dog,cat,rabbit,ferret | Kind of pet. | a {v} | for a {v} | animal species | -
pet_weight_kg | num:0.5:80:1 | Weight of the pet in kilograms. | a weight of {v} kg | weighing {v} kg | weight weight_kg | -
pet_species | enum:dog,cat,rabbit,bird,guinea_pig | Kind of animal. | {v} | - | species animal | -
max_pet_age | int:1:15 | Highest age in years. | at most {v} years old | up to {v} years old | max_age age_limit | no limit
pet_name | pick:pet_name | Name of the pet. | the pet {v} | for {v} | name animal_name | -
clinic_name | pick:venue | Name of the clinic. | the clinic {v} | at {v} | clinic practice | the nearest clinic
pet_age_years | num:0.5:20:1 | Age of the pet in years. | an age of {v} years | aged {v} years | age years | -
file_size_mb | num:1:90000:1 | Size of the file in megabytes. | a {v} MB file | for a file of {v} MB | size_mb file_size | -
bandwidth_mbps | num:1:2000:1 | Connection speed in megabits per second. | a {v} Mbps connection | at {v} Mbps | bandwidth speed_mbps | -
min_data_gb | int:1:200 | Lowest monthly data allowance in GB. | at least {v} GB of data | with at least {v} GB of data | data_gb min_data | 0
max_monthly_price | num:5:120:2 | Highest monthly price in US dollars. | at most {v} dollars a month | under {v} dollars a month | price_max budget | no limit
network_type | enum:4g,5g | Network generation. | {v} coverage | for {v} | generation technology | -
data_mb | int:50:20000 | Mobile data used in MB. | {v} MB of data | using {v} MB of data | data usage_mb | -
call_minutes | int:5:600 | Call minutes used. | {v} call minutes | - | minutes voice_minutes | -
"""

# ---------------------------------------------------------------- domains and objects

# "## domain module [module ...]" starts a domain; then one object a line:
# kind | name forms | noun | gloss | required | optional | result unit | verbs ("-": the kind's).
# Units: "@pool" draws from RESULTS, "=param" names the unit by that argument's value.
OBJECT_TABLE = """
## finance finance fin
metric | compound_interest compound_growth | compound interest | earned on a principal at a fixed annual rate | principal annual_rate years | compounding_frequency | dollars | -
metric | loan_payment monthly_loan_payment | monthly loan payment | of an amortizing loan | loan_amount annual_rate term_months | down_payment | dollars per month | -
metric | return_on_investment investment_return | return on investment | of an investment from its cost and final value | initial_cost final_value | holding_years | percent | -
lookup | stock_price share_price | share price | of a listed company | ticker | exchange trade_date | dollars | -
lookup | exchange_rate fx_rate | exchange rate | between two currencies | base_currency target_currency | rate_date | per unit | -
convert | currency currency_amount | amount of money | from one currency to another at the current rate | amount from_currency to_currency | - | =to_currency | -
metric | retirement_savings savings_projection | projected savings | from regular monthly contributions | monthly_contribution annual_rate years | initial_balance | dollars | -
metric | income_tax tax_due | income tax due | on an annual income | annual_income country | filing_status | dollars | -
search | dividends dividend_payments | dividend payments | made by a listed company in a given year | ticker fiscal_year | max_results | - | -
## geometry geometry geom
metric | circle_area | area of a circle | with a given radius | radius | length_unit | square units | -
metric | triangle_area | area of a triangle | from its base and height | base_length height | length_unit | square units | -
metric | polygon_perimeter regular_polygon_perimeter | perimeter of a regular polygon | from its number of sides and side length | side_count side_length | - | units | -
metric | sphere_volume | volume of a sphere | with a given radius | radius | decimal_places | cubic units | -
metric | cylinder_surface_area cylinder_area | surface area of a cylinder | from its radius and height | radius height | decimal_places | square units | -
metric | hypotenuse right_triangle_hypotenuse | hypotenuse of a right triangle | from its two legs | leg_a leg_b | - | units | -
metric | cone_volume | volume of a cone | from its base radius and height | radius height | length_unit | cubic units | -
metric | ellipse_area | area of an ellipse | from its two semi-axes | semi_major semi_minor | - | square units | -
metric | arc_length circular_arc_length | length of a circular arc | from its radius and central angle | radius angle_degrees | - | units | -
## physics physics phys
metric | kinetic_energy | kinetic energy | of a moving body | mass_kg velocity_ms | - | joules | -
metric | projectile_range | range of a projectile | launched over flat ground | initial_speed launch_angle | gravity | meters | -
metric | free_fall_time fall_time | free-fall time | of an object dropped from rest | drop_height | gravity | seconds | -
metric | pendulum_period | period of a simple pendulum | from its length | pendulum_length | gravity | seconds | -
metric | circuit_current ohms_law_current | current through a resistor | from the voltage across it and its resistance | voltage resistance | - | amperes | -
metric | wave_frequency light_frequency | frequency of a light wave | from its wavelength | wavelength_nm | medium | terahertz | -
metric | buoyant_force | buoyant force | on an object submerged in a fluid | object_volume fluid_density | gravity | newtons | -
metric | centripetal_force | centripetal force | on a body moving in a circle | mass_kg velocity_ms radius_m | - | newtons | -
convert | energy energy_units | energy value | between units of energy | energy_value energy_from energy_to | - | =energy_to | -
## weather weather meteo
lookup | weather_forecast forecast | weather forecast | for a city | city | forecast_days units | @weather | -
lookup | current_weather current_conditions | current weather | in a city | city | include_humidity | @weather | -
lookup | air_quality air_quality_index | air quality index | for a city | city | pollutant | AQI | -
lookup | uv_index | UV index | for a city on a given day | city day_date | - | @level | -
lookup | rainfall_total monthly_precipitation | total rainfall | in a city over one month | city month year | - | millimeters | -
lookup | sunrise_time sunrise | sunrise time | for a city on a given date | city day_date | - | @clock | -
search | weather_alerts severe_weather_alerts | weather alerts | active in a country | country | severity | - | -
metric | heat_index | heat index | from the air temperature and relative humidity | temperature_c humidity_percent | - | degrees Celsius | -
metric | wind_chill | wind chill temperature | from the air temperature and wind speed | temperature_c wind_speed_kmh | - | degrees Celsius | -
## travel travel trips
search | flights | flights | between two airports on a given date | origin_airport destination_airport departure_date | cabin_class passengers | - | -
action | flight flight_seat | a flight | for a passenger | flight_number passenger_name | seat_preference | - | book reserve
search | hotels | hotels | in a city for a stay | city check_in_date nights | max_price_per_night min_rating | - | -
action | hotel_room hotel_reservation | a hotel room | for a stay | hotel_name check_in_date nights | room_type | - | book reserve
lookup | visa_requirements entry_requirements | visa requirements | for travelers of one country visiting another | citizenship destination_country | trip_purpose | @visa | -
search | attractions tourist_attractions | tourist attractions | in a city | city | attraction_category max_results | - | -
metric | trip_budget travel_budget | travel budget | for a trip to a city | city trip_days travelers | comfort_level | dollars | -
action | rental_car car_rental | a rental car | for a trip | pickup_city pickup_date rental_days | car_class | - | book reserve
## cooking cooking kitchen
search | recipes | recipes | that use the given ingredients | ingredients | cuisine max_prep_minutes | - | -
lookup | nutrition_facts recipe_nutrition | nutrition facts | of a dish | dish | servings | kcal | -
convert | cooking_measurement kitchen_units | cooking measurement | between kitchen units | quantity measure_from measure_to | - | =measure_to | -
metric | scaled_recipe recipe_scaling | scaled ingredient weight | of a recipe for a new number of servings | dish original_servings target_servings | - | grams | -
metric | baking_time | baking time | of a dish at a given oven temperature | dish oven_temperature_c | altitude_m | minutes | -
search | ingredient_substitutes substitutes | substitutes | for an ingredient | ingredient | diet | - | -
lookup | drink_pairing beverage_pairing | drink pairing | for a dish | dish | drink_type | @pairing | -
action | meal_plan | a meal plan | for a number of days and a daily calorie target | plan_days daily_calories | diet | - | create generate
## sports sports athletics
lookup | team_standing league_standing | league standing | of a team in a season | team_name season | - | @rank | -
lookup | player_statistics player_stats | season statistics | of a player | player_name season | stat_type | per game | -
search | upcoming_matches fixtures | upcoming matches | of a team | team_name | max_results | - | -
lookup | match_result game_score | final score | of a match between two teams on a date | home_team away_team match_date | - | @score | -
metric | win_percentage | win percentage | from a team's record | wins losses | ties | percent | -
action | training_session | a training session | with a coach | coach_name session_date session_time | duration_minutes | - | book schedule
metric | running_pace race_pace | average running pace | from a distance and finishing time | distance_km finish_minutes | - | minutes per km | -
## music music audio
search | songs tracks | songs | by an artist | artist_name | genre max_results | - | -
lookup | album_details album_info | album details | of an album by an artist | album_title artist_name | - | @album | -
action | playlist | a playlist | from a list of songs | playlist_name songs | is_public | - | create generate
search | concerts tour_dates | concerts | by an artist | artist_name | city_filter | - | -
metric | note_frequency pitch_frequency | frequency of a musical note | in a given octave | note_name octave | tuning_hz | hertz | -
lookup | artist_biography artist_bio | biography | of an artist | artist_name | language | @bio | -
## chemistry chemistry chem
metric | molar_mass molecular_weight | molar mass | of a chemical compound from its formula | formula | - | grams per mole | -
metric | molarity solution_molarity | molarity | of a solution | solute_moles solution_liters | - | mol/L | -
metric | solution_ph ph_value | pH | of a strong acid solution | acid_molarity | solution_temperature_c | - | -
metric | gas_pressure ideal_gas_pressure | pressure | of an ideal gas | gas_moles temperature_k gas_liters | - | kilopascals | -
lookup | element_properties element_info | properties | of a chemical element | element | element_property | @element | -
metric | percent_yield reaction_yield | percent yield | of a reaction | actual_yield_g theoretical_yield_g | - | percent | -
metric | radioactive_decay remaining_isotope_mass | remaining mass | of a radioactive sample after some time | initial_mass_g half_life_years elapsed_years | - | grams | -
lookup | solubility compound_solubility | solubility | of a compound in a solvent | compound solvent | solution_temperature_c | grams per 100 mL | -
## biology biology bio
lookup | species_profile species_info | profile | of an animal species | species | include_habitat | @species | -
metric | population_growth | projected population | of a species under exponential growth | initial_population growth_rate years | - | individuals | -
metric | gc_content | GC content | of a DNA sequence | dna_sequence | - | percent | -
metric | doubling_time cell_doubling_time | doubling time | of a cell culture | initial_cells final_cells elapsed_hours | - | hours | -
search | species_by_habitat habitat_species | species | living in a habitat within a country | habitat country | max_results | - | -
lookup | conservation_status | conservation status | of a species | species | - | @iucn | -
metric | allele_frequency hardy_weinberg | heterozygote frequency | under Hardy-Weinberg equilibrium | dominant_allele_frequency | - | - | -
## logistics logistics shipping
metric | shipping_cost | shipping cost | of a parcel between two cities | package_weight_kg origin_city destination_city | service_level | dollars | -
lookup | shipment_status package_status | status | of a shipment | tracking_number | - | @shipment | -
action | parcel_pickup pickup | a parcel pickup | at an address | pickup_address pickup_date | time_window | - | schedule book
metric | delivery_time delivery_estimate | delivery time | between two cities | origin_city destination_city | service_level | days | -
metric | pallets_needed pallet_count | number of pallets | needed for a shipment | box_count boxes_per_pallet | - | pallets | -
search | warehouses | warehouses | in a city | city | min_capacity_m2 | - | -
metric | fuel_cost route_fuel_cost | fuel cost | of a road trip | distance_km fuel_consumption fuel_price | - | dollars | -
search | shipments | shipments | of a customer | customer_name | shipment_state | - | -
## retail retail shop
search | products | products | matching a search query | search_query | max_price sort_by | - | -
lookup | stock_level product_availability | stock level | of a product in a store | product_sku store_city | - | units in stock | -
action | order purchase_order | an order | for a customer | product_sku item_count customer_name | gift_wrap | - | place create
metric | discounted_price sale_price | discounted price | of an item | original_price discount_percent | - | dollars | -
lookup | order_status | status | of an order | order_id | - | @shipment | -
action | return_request | a return request | for an order | order_id return_reason | - | - | create submit
search | stores store_locations | stores | in a city | city | open_now | - | -
search | product_reviews reviews | reviews | of a product | product_sku | min_stars | - | -
## health health wellness
metric | bmi body_mass_index | body mass index | from weight and height | weight_kg height_m | - | kg/m2 | -
metric | daily_calories calorie_needs | daily calorie needs | of a person | weight_kg height_cm age_years sex | activity_level | kcal per day | -
metric | target_heart_rate | target heart rate | for exercise at a given age | age_years | intensity | beats per minute | -
metric | water_intake daily_water_intake | recommended daily water intake | from body weight | weight_kg | activity_minutes | liters | -
search | clinics nearby_clinics | clinics | in a city by specialty | city specialty | - | - | -
action | doctor_appointment medical_appointment | a doctor's appointment | with a doctor | doctor_name appointment_date appointment_time | visit_reason | - | book schedule
lookup | drug_interactions medication_interactions | interactions | between medications | medications | - | @interaction | -
metric | medication_dose dosage | dose | of a medication from body weight | medication weight_kg | doses_per_day | milligrams | -
## astronomy astronomy astro
metric | orbital_period orbit_period | orbital period | of a body around a star | semi_major_axis_au | star_mass_solar | years | -
lookup | planet_position planet_coordinates | sky position | of a planet on a date | planet observation_date | observer_city | @radec | -
lookup | star_properties star_info | properties | of a star | star | star_property | @starprop | -
metric | escape_velocity | escape velocity | from a planet's surface | planet_mass_earths planet_radius_km | - | km/s | -
metric | light_travel_time | light travel time | over a distance in astronomical units | distance_au | - | minutes | -
search | meteor_showers | meteor showers | visible in a year | year | hemisphere | - | -
lookup | moon_phase lunar_phase | moon phase | on a date | observation_date | observer_city | @moon | -
metric | telescope_magnification magnification | magnification | of a telescope and eyepiece | focal_length_mm eyepiece_mm | - | times | -
search | eclipses | eclipses | in a given year | year eclipse_type | - | - | -
## education education edu
metric | gpa grade_point_average | grade point average | from course scores | course_scores | grading_scale | points | -
search | courses online_courses | courses | on a subject | subject | course_level max_weeks | - | -
action | course_registration enrollment | a course registration | for a student | student_name course_code | - | - | create submit
lookup | exam_schedule | exam schedule | of a course | course_code | semester | @examdate | -
metric | final_grade weighted_grade | final grade | from coursework and exam scores | coursework_score exam_score exam_weight | - | points | -
metric | study_hours weekly_study_hours | weekly study hours | for a course load | credits weeks | - | hours per week | -
search | scholarships | scholarships | for a field of study in a country | subject country | min_award | - | -
## real_estate real_estate housing
search | listings property_listings | property listings | in a city | city bedrooms | max_price_total property_type | - | -
metric | mortgage_payment | monthly mortgage payment | for a home purchase | home_price down_payment annual_rate term_years | - | dollars per month | -
metric | home_value property_value | market value | of a home | floor_area_m2 city bedrooms | year_built | dollars | -
metric | rental_yield | gross rental yield | of a property | annual_rent property_price | - | percent | -
action | property_viewing viewing | a property viewing | for a listing | listing_id viewing_date viewing_time | - | - | book schedule
lookup | neighborhood_profile neighborhood_stats | neighborhood profile | of a city | city | neighborhood_metric | out of 10 | -
metric | closing_costs | closing costs | of a home purchase in a country | home_price country | - | dollars | -
## energy energy power
metric | solar_output solar_panel_output | daily energy output | of a solar panel array | panel_area_m2 panel_efficiency sun_hours | - | kWh | -
metric | electricity_cost energy_bill | electricity bill | for a billing period | kwh_used price_per_kwh | fixed_fee | dollars | -
metric | appliance_energy appliance_energy_use | energy use | of an appliance | power_watts hours_per_day | period_days | kWh | -
metric | trip_emissions co2_emissions | CO2 emissions | of a car trip | distance_km fuel_type | passengers_count | kg CO2 | -
lookup | grid_carbon_intensity carbon_intensity | grid carbon intensity | of a country's electricity | country | - | g CO2 per kWh | -
metric | battery_runtime | runtime | of a battery under a constant load | battery_wh load_watts | - | hours | -
metric | wind_turbine_power turbine_power | power output | of a wind turbine | rotor_diameter_m wind_speed_ms | air_density | kilowatts | -
search | charging_stations ev_chargers | charging stations | in a city | city | connector_type | - | -
## agriculture agriculture farm
metric | crop_yield yield_estimate | expected yield | of a crop on a field | crop field_hectares | irrigated | tonnes | -
metric | fertilizer_amount fertilizer_requirement | fertilizer requirement | of a crop on a field | crop field_hectares soil_nitrogen_ppm | - | kg | -
lookup | planting_window planting_calendar | planting window | of a crop in a country | crop country | - | @months | -
metric | irrigation_volume water_requirement | irrigation water requirement | of a crop over a period | crop field_hectares period_days | - | cubic meters | -
lookup | commodity_price crop_price | market price | of a crop | crop | market | dollars per tonne | -
metric | livestock_feed feed_requirement | feed requirement | of a herd over a period | livestock herd_size period_days | - | kg | -
## transit transit transport
search | train_connections trains | train connections | between two cities on a date | origin_city destination_city travel_date | depart_after | - | -
lookup | bus_timetable bus_schedule | timetable | of a bus route at a stop | route_number stop_name | - | @clock | -
metric | ticket_fare fare | ticket fare | for a journey across fare zones | zones passenger_type | - | dollars | -
action | train_ticket | a train ticket | for a passenger | train_number passenger_name travel_date | seat_class | - | book reserve
lookup | service_disruptions line_disruptions | service disruptions | on a city's public transport | city | transit_mode | @disruption | -
metric | travel_time journey_time | travel time | between two stops | origin_stop destination_stop | transit_mode | minutes | -
## cinema cinema movies
search | showtimes movie_showtimes | showtimes | of a movie in a city | movie_title city | show_date | - | -
lookup | movie_details movie_info | details | of a movie | movie_title | include_cast | @movie | -
action | cinema_tickets movie_tickets | cinema tickets | for a showing | movie_title cinema_name show_time ticket_count | - | - | book reserve
search | movies_by_genre movies | movies | of a genre released in a year | film_genre release_year | min_score | - | -
lookup | box_office box_office_gross | box office gross | of a movie | movie_title | market_region | million dollars | -
## library library books
search | books books_by_author | books | by an author | author_name | published_after language | - | -
lookup | book_availability | availability | of a book at a library branch | book_title branch | - | @availability | -
action | book_hold hold | a hold on a book | for a library member | book_title member_id | pickup_branch | - | place create
metric | reading_time | reading time | of a book | page_count | words_per_minute | hours | -
metric | late_fee overdue_fine | late fee | for an overdue item | days_overdue daily_fine | - | dollars | -
lookup | book_by_isbn isbn_record | catalog record | of a book by ISBN | isbn | - | @bookrec | -
## gaming gaming games
lookup | player_rank leaderboard_rank | leaderboard rank | of a player | gamer_tag game_mode | - | @rank | -
search | game_servers servers | game servers | in a region | server_region | max_ping | - | -
metric | xp_to_level experience_needed | experience points needed | to go from one level to another | current_level target_level | - | XP | -
action | tournament_registration tournament_entry | a tournament registration | for a team | squad_name tournament_name | - | - | create submit
metric | win_probability elo_win_probability | win probability | from two Elo ratings | player_rating opponent_rating | - | percent | -
lookup | patch_notes game_patch_notes | patch notes | of a game version | game_title game_version | - | @patch | -
## employment jobs hr
search | job_postings jobs | job postings | for a job title in a city | job_title city | remote_only min_salary | - | -
metric | net_salary salary_after_tax | net salary | after income tax in a country | gross_salary country | - | dollars per year | -
metric | overtime_pay | overtime pay | for extra hours worked | hourly_rate overtime_hours | overtime_multiplier | dollars | -
action | job_interview interview | a job interview | with a candidate | candidate_name interview_date interview_time | interviewer_name | - | schedule book
lookup | leave_balance vacation_balance | leave balance | of an employee | employee_id | leave_type | days | -
search | open_positions | open positions | in a department | department | - | - | -
## events events calendar
search | local_events events | events | in a city on a date | city event_date | event_category | - | -
action | venue venue_booking | a venue | for an event | venue_name event_date guest_count | - | - | book reserve
metric | catering_cost | catering cost | for an event | guest_count price_per_guest | service_fee_percent | dollars | -
action | meeting calendar_event | a meeting | with attendees | meeting_title meeting_date start_time attendees | meeting_minutes | - | schedule create
lookup | ticket_availability event_tickets | ticket availability | for an event on a date | event_name event_date | - | @availability | -
action | invitations event_invitations | invitations | for an event | event_name recipients | - | - | send
## ecology ecology environment
metric | carbon_sequestration tree_carbon_uptake | carbon sequestered | by planted trees over time | tree_count tree_species years | - | tonnes CO2 | -
lookup | water_quality river_water_quality | water quality reading | of a river | river | water_parameter | mg/L | -
metric | recycling_rate | recycling rate | of a municipality | recycled_tonnes total_waste_tonnes | - | percent | -
search | protected_areas nature_reserves | protected areas | in a country | country | min_area_km2 | - | -
lookup | deforestation_rate forest_loss | forest loss | of a country in a year | country year | - | hectares | -
## statistics stats statistics
metric | mean average | arithmetic mean | of a list of numbers | numbers | - | - | -
metric | standard_deviation std_dev | standard deviation | of a list of numbers | numbers | sample | - | -
metric | median | median | of a list of numbers | numbers | - | - | -
metric | factorial | factorial | of a non-negative integer | small_integer | - | - | -
metric | gcd greatest_common_divisor | greatest common divisor | of two integers | first_integer second_integer | - | - | -
metric | binomial_probability | binomial probability | of an exact number of successes | trials successes success_probability | - | - | -
metric | percentile | percentile | of a list of numbers | numbers percentile_rank | - | - | -
convert | number_base base_conversion | integer | to another numeral base | integer_value target_base | - | - | -
## automotive automotive auto
metric | fuel_economy fuel_efficiency | fuel economy | of a vehicle from distance and fuel used | distance_km fuel_liters | - | liters per 100 km | -
lookup | vehicle_specs car_specifications | specifications | of a car model | car_make car_model model_year | - | @specs | -
action | service_appointment car_service | a car service appointment | for a vehicle | license_plate service_type appointment_date | - | - | book schedule
metric | vehicle_depreciation depreciation | depreciated value | of a vehicle | purchase_price vehicle_age_years | depreciation_rate | dollars | -
metric | stopping_distance braking_distance | stopping distance | of a car at a given speed | speed_kmh | road_condition | meters | -
## pets pets petcare
metric | food_portion pet_food_portion | daily food portion | for a pet | pet_type pet_weight_kg | - | grams | -
search | adoptable_pets pets_for_adoption | adoptable pets | in a city | city pet_species | max_pet_age | - | -
action | vet_appointment | a vet appointment | for a pet | pet_name appointment_date | clinic_name | - | book schedule
metric | pet_age_in_human_years human_age_equivalent | human-age equivalent | of a pet's age | pet_type pet_age_years | - | years | -
## telecom telecom network
metric | download_time | download time | of a file at a given bandwidth | file_size_mb bandwidth_mbps | - | seconds | -
search | mobile_plans phone_plans | mobile plans | in a country | country | min_data_gb max_monthly_price | - | -
lookup | network_coverage coverage | network coverage | in a city | city network_type | - | percent | -
metric | roaming_charges roaming_cost | roaming charges | for usage abroad | country data_mb call_minutes | - | dollars | -
"""

# objects (domain.first form) that can stand in for each other: never an irrelevance pair
RELATED = (
    ("finance.loan_payment", "real_estate.mortgage_payment"),
    ("finance.income_tax", "employment.net_salary"),
    ("retail.order_status", "logistics.shipment_status"),
    ("cinema.showtimes", "events.local_events"),
    ("music.concerts", "events.local_events"),
    ("statistics.mean", "education.gpa"),
    ("logistics.fuel_cost", "automotive.fuel_economy"),
    ("energy.trip_emissions", "automotive.fuel_economy"),
    ("health.doctor_appointment", "pets.vet_appointment"),
)

RESULTS: dict[str, tuple[str, ...]] = _pools(
    {
        "weather": (
            "sunny|partly cloudy|overcast|light rain|heavy rain|snow showers|fog|thunderstorms"
        ),
        "level": "low|moderate|high|very high|extreme",
        "clock": "05:42|06:18|06:55|07:31|08:04|14:10|17:45|19:20",
        "visa": "visa-free for 90 days|visa on arrival|e-visa required|visa required before travel",
        "pairing": "a dry riesling|a light pilsner|jasmine tea|a chilled rose|a ginger spritz",
        "rank": "1st|2nd|3rd|4th|7th|12th|15th",
        "score": "2-1|0-0|3-2|1-4|98-91|105-110",
        "album": "12 tracks, 47 minutes|9 tracks, 38 minutes|14 tracks, 61 minutes",
        "bio": (
            "formed in 2009, five studio albums|solo artist since 2014, three albums|"
            "formed in 1998, eight albums"
        ),
        "element": "12.011|3.44|1538 degrees Celsius|7.87 g/cm3|0.97",
        "species": (
            "omnivore, lives 10-14 years|herbivore, lives 20 years|carnivore, lives 8-12 years"
        ),
        "iucn": "least concern|near threatened|vulnerable|endangered|critically endangered",
        "shipment": "in transit|out for delivery|delivered|awaiting pickup|held at customs",
        "interaction": (
            "no known interaction|minor interaction|moderate interaction|major interaction"
        ),
        "radec": "RA 04h12m, Dec +21.3|RA 11h47m, Dec -02.8|RA 19h05m, Dec -22.6",
        "starprop": "8.6 light-years|40 solar luminosities|spectral type A0V|magnitude 0.03",
        "moon": "new moon|waxing crescent|first quarter|waxing gibbous|full moon|waning crescent",
        "examdate": "2025-05-14 09:00|2025-12-10 13:30|2025-08-02 10:00",
        "months": "March to April|April to May|September to October|October to November",
        "disruption": "no disruptions|minor delays|line closed for works|reduced service",
        "movie": "drama, 2h 04m, rated 7.8|comedy, 1h 36m, rated 6.9|thriller, 1h 52m, rated 7.2",
        "availability": "available|2 copies available|checked out|sold out|few left",
        "bookrec": "hardcover, 342 pages, 2019|paperback, 288 pages, 2021|ebook, 410 pages, 2016",
        "patch": "balance changes and bug fixes|new map and ranked fixes|performance improvements",
        "specs": "1.5 L petrol, 110 kW|2.0 L diesel, 140 kW|electric, 150 kW, 420 km range",
    }
)
KIND_VERBS = {
    "metric": ("calculate", "compute", "estimate"),
    "lookup": ("get", "fetch", "lookup", "retrieve", "find"),
    "search": ("search", "find", "list", "count"),
    "convert": ("convert",),
}
VERB_3RD = {
    "calculate": "Calculates",
    "compute": "Computes",
    "estimate": "Estimates",
    "get": "Gets",
    "fetch": "Fetches",
    "lookup": "Looks up",
    "retrieve": "Retrieves",
    "find": "Finds",
    "search": "Searches for",
    "list": "Lists",
    "count": "Counts",
    "convert": "Converts",
    "book": "Books",
    "reserve": "Reserves",
    "schedule": "Schedules",
    "create": "Creates",
    "place": "Places",
    "submit": "Submits",
    "send": "Sends",
    "generate": "Generates",
}
RETURNS = {
    "metric": (
        "Returns the value in {unit}.",
        "The result is given in {unit}.",
        "Returns a number in {unit}.",
    ),
    "lookup": (
        "Returns the most recent value on record.",
        "Returns the value as text.",
        "Data is refreshed daily.",
    ),
    "search": (
        "Returns matching entries ordered by relevance.",
        "Results are paginated; the first page is returned.",
    ),
    "count": ("Returns the number of matching entries.", "Returns a single integer count."),
    "convert": ("Uses current reference factors.", "Returns the converted amount."),
    "action": (
        "Returns a confirmation reference.",
        "Fails if the slot is no longer available.",
        "Returns the booking reference on success.",
    ),
}

TEMPLATES = {
    "metric": (
        "What {is} the {noun} {args}?",
        "Calculate the {noun} {args}.",
        "Could you compute the {noun} {args}?",
        "I need the {noun} {args}.",
        "Please work out the {noun} {args}.",
        "Can you tell me the {noun} {args}?",
        "Estimate the {noun} {args}.",
        "Help me figure out the {noun} {args}.",
    ),
    "lookup": (
        "What {is} the {noun} {args}?",
        "Get me the {noun} {args}.",
        "Can you look up the {noun} {args}?",
        "Find the {noun} {args}.",
        "I'd like to know the {noun} {args}.",
        "Tell me the {noun} {args}.",
        "Please fetch the {noun} {args}.",
        "Check the {noun} {args}.",
    ),
    "search": (
        "Find {noun} {args}.",
        "Search for {noun} {args}.",
        "Show me {noun} {args}.",
        "Can you list {noun} {args}?",
        "I'm looking for {noun} {args}.",
        "Are there any {noun} {args}?",
    ),
    "count": (
        "How many {noun} are there {args}?",
        "Count the {noun} {args}.",
        "Give me the number of {noun} {args}.",
        "How many {noun} can you find {args}?",
    ),
    "action": (
        "Please {verb} {noun} {args}.",
        "Can you {verb} {noun} {args}?",
        "I'd like to {verb} {noun} {args}.",
        "I need you to {verb} {noun} {args}.",
        "{Verb} {noun} {args}, please.",
        "Could you {verb} {noun} {args}?",
    ),
    "convert": (
        "Convert {args}.",
        "Can you convert {args}?",
        "Please convert {args}.",
        "I need to convert {args}.",
        "Help me convert {args}.",
    ),
}
GIVEN = (
    "Given {args}, what {is} the {noun}?",
    "With {args}, calculate the {noun}.",
    "If I have {args}, what would the {noun} be?",
    "Using {args}, compute the {noun}.",
)
AGAIN = (", and also", "; then", ", and again", "; separately,")
NEXT = ("Also,", "In addition,", "After that,", "Next,", "Then,", "Separately,")
GENERAL = (
    "Write a short poem about {topic}.",
    "Tell me a joke about {topic}.",
    "Can you write a two-sentence story about {topic}?",
    "Suggest a title for a painting of {topic}.",
    "Describe {topic} in three words.",
)
REFUSALS = (
    "None of the available functions can help with this request.",
    "I can't do that with the functions I have; none of them covers this request.",
    "The provided functions don't apply to this question, so I won't call any of them.",
    "Sorry, none of the available tools can answer that.",
    "None of the functions ({names}) can answer this, so no function call is possible.",
)
DEFAULT_NOTES = ("Default: {d}.", "Defaults to {d}.", "Optional; default {d}.", "(default: {d})")
JSON_TYPE = {
    "int": "integer",
    "num": "number",
    "bool": "boolean",
    "list": "array",
    "ints": "array",
    "persons": "array",
}


# ---------------------------------------------------------------- the catalog


@dataclass(frozen=True)
class Param:
    """A parameter template: how its values are drawn and how a question states them."""

    key: str
    gen: tuple[str, ...]  # ("int", lo, hi), ("pick", pool), ("enum", "a,b"), ...
    description: str
    np: str  # noun phrase; booleans: the phrase for true
    pp: str  # prepositional phrase; booleans: the phrase for false
    aliases: tuple[str, ...]
    default: str | None

    @property
    def kind(self) -> str:
        return self.gen[0]

    @property
    def measure(self) -> bool:
        return self.kind in ("int", "num")

    def json_schema(self) -> dict[str, Any]:
        s: dict[str, Any] = {"type": JSON_TYPE.get(self.kind, "string")}
        if self.kind == "enum":
            s["enum"] = self.gen[1].split(",")
        elif self.kind == "ints":
            s["items"] = {"type": "integer"}
        elif s["type"] == "array":
            s["items"] = {"type": "string"}
        return s


@dataclass(frozen=True)
class Obj:
    """What a function is about: a domain's metric, lookup, search, action or conversion."""

    domain: str
    modules: tuple[str, ...]
    kind: str
    forms: tuple[str, ...]
    noun: str
    gloss: str
    required: tuple[str, ...]
    optional: tuple[str, ...]
    unit: str
    verbs: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.domain}.{self.forms[0]}"


@dataclass(frozen=True)
class Slot:
    name: str  # the argument's name in this schema
    param: Param
    required: bool


@dataclass(frozen=True)
class Function:
    """One drawn function schema."""

    name: str
    obj: Obj
    verb: str
    description: str
    slots: tuple[Slot, ...]
    notes: tuple[str, ...]  # per slot: the default note of an optional one, else ""

    def schema(self) -> dict[str, Any]:
        props = {}
        for s, note in zip(self.slots, self.notes):
            props[s.name] = {
                **s.param.json_schema(),
                "description": f"{s.param.description} {note}".strip(),
            }
        required = [s.name for s in self.slots if s.required]
        params = {"type": "object", "properties": props, "required": required}
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": params},
        }


Call = tuple[Function, dict[str, Any]]


def _fields(line: str, n: int) -> list[str]:
    parts = [p.strip() for p in line.split(" | ")]
    if len(parts) != n:
        raise ValueError(f"toolcalls vocabulary: expected {n} fields in {line!r}")
    return parts


def _gen(spec: str) -> tuple[str, ...]:
    kind, _, rest = spec.partition(":")
    return (kind, *rest.split(":")) if kind not in ("enum", "code") else (kind, rest)


def parse_params(table: str = PARAM_TABLE) -> dict[str, Param]:
    out = {}
    for line in table.strip().splitlines():
        key, gen, desc, np, pp, aka, default = _fields(line, 7)
        pp = "" if pp == "-" else pp
        aliases = () if aka == "-" else tuple(aka.split())
        out[key] = Param(key, _gen(gen), desc, np, pp, aliases, None if default == "-" else default)
    return out


def _words(field: str) -> tuple[str, ...]:
    return () if field == "-" else tuple(field.split())


def parse_objects(table: str = OBJECT_TABLE) -> list[Obj]:
    out: list[Obj] = []
    domain, modules = "", ()
    for line in table.strip().splitlines():
        if line.startswith("## "):
            domain, *rest = line[3:].split()
            modules = tuple(rest)
            continue
        kind, forms, noun, gloss, req, opt, unit, verbs = _fields(line, 8)
        unit = "" if unit == "-" else unit
        args = (_words(forms), noun, gloss, _words(req), _words(opt), unit, _words(verbs))
        out.append(Obj(domain, modules, kind, *args))
    return out


@dataclass(frozen=True)
class Catalog:
    params: dict[str, Param]
    objects: tuple[Obj, ...]
    related: frozenset[tuple[str, str]]


_CATALOG: Catalog | None = None


def catalog() -> Catalog:
    """The parsed, checked vocabulary (every object's parameters exist, optional ones have a
    default, every action object names its verbs)."""
    global _CATALOG
    if _CATALOG is None:
        params, objects = parse_params(), parse_objects()
        for o in objects:
            missing = [k for k in o.required + o.optional if k not in params]
            no_default = [k for k in o.optional if k in params and params[k].default is None]
            if missing or no_default or (o.kind == "action" and not o.verbs):
                raise ValueError(f"toolcalls vocabulary: {o.key}: {missing or no_default}")
        bad = [n for p in params.values() for n in (p.key, *p.aliases) if keyword.iskeyword(n)]
        if bad:
            raise ValueError(f"toolcalls vocabulary: parameter names {bad} are Python keywords")
        pairs = frozenset(RELATED) | frozenset((b, a) for a, b in RELATED)
        _CATALOG = Catalog(params, tuple(objects), pairs)
    return _CATALOG


def name_space() -> set[str]:
    """Every function name the catalog can draw."""
    names = set()
    for o in catalog().objects:
        for form in o.forms:
            for m in o.modules:
                names.add(f"{m}.{form}")
            for v in o.verbs or KIND_VERBS[o.kind]:
                names.add(f"{v}_{form}")
                names |= {f"{m}.{v}_{form}" for m in o.modules}
    return names


# ---------------------------------------------------------------- drawing functions and values


def _article(noun: str) -> str:
    return ("an " if noun[0].lower() in "aeiou" else "a ") + noun


def _plural(noun: str) -> bool:
    last = noun.split()[-1]
    return last.endswith("s") and not last.endswith(("ss", "us", "is"))


def _describe(obj: Obj, verb: str, rng: random.Random) -> str:
    noun = {
        "metric": f"the {obj.noun}",
        "lookup": f"the {obj.noun}",
        "search": obj.noun,
        "convert": _article(obj.noun),
        "action": obj.noun,
    }[obj.kind]
    first = f"{VERB_3RD[verb]} {noun} {obj.gloss}."
    kind = "count" if verb == "count" else obj.kind
    unit = obj.unit if not obj.unit.startswith(("@", "=")) else ""
    notes = [n for n in RETURNS[kind] if unit or "{unit}" not in n]
    return f"{first} {rng.choice(notes).format(unit=unit)}" if notes else first


def make_function(obj: Obj, rng: random.Random) -> Function:
    """One function schema for `obj`: verb, name form, naming style, parameter names and a
    subset of its optional parameters."""
    params = catalog().params
    verb = rng.choice(obj.verbs or KIND_VERBS[obj.kind])
    form, module, style = rng.choice(obj.forms), rng.choice(obj.modules), rng.random()
    base = f"{verb}_{form}"
    name = base if style < 0.6 else f"{module}.{base}" if style < 0.85 else f"{module}.{form}"
    opt = list(obj.optional)
    opt = rng.sample(opt, rng.randint(1, len(opt))) if opt else []
    slots, notes, used = [], [], set()
    for key, req in [(k, True) for k in obj.required] + [(k, False) for k in opt]:
        p = params[key]
        names = [n for n in (p.key, *p.aliases) if n not in used] or [f"{p.key}_{len(used)}"]
        arg = names[0] if rng.random() < 0.5 else rng.choice(names)
        used.add(arg)
        slots.append(Slot(arg, p, req))
        notes.append("" if req else rng.choice(DEFAULT_NOTES).format(d=p.default))
    return Function(name, obj, verb, _describe(obj, verb, rng), tuple(slots), tuple(notes))


def _code(pattern: str, rng: random.Random) -> str:
    letters = "ABCDEFGHJKLMNPQRSTUVWXYZ"
    return "".join(
        str(rng.randint(0, 9)) if c == "#" else rng.choice(letters) if c == "@" else c
        for c in pattern
    )


def _person(rng: random.Random) -> str:
    return f"{rng.choice(POOLS['first'])} {rng.choice(POOLS['last'])}"


def draw_value(p: Param, rng: random.Random) -> Any:
    """A concrete value of parameter `p` (floats have 1-2 decimals and a fraction)."""
    kind, args = p.gen[0], p.gen[1:]
    if kind == "int":
        return rng.randint(int(args[0]), int(args[1]))
    if kind == "num":
        dec = int(args[2])
        v = round(rng.uniform(float(args[0]), float(args[1])), dec)
        return v if not v.is_integer() else round(v + 10**-dec * rng.randint(1, 9), dec)
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "pick":
        return rng.choice(POOLS[args[0]])
    if kind == "enum":
        return rng.choice(args[0].split(","))
    if kind == "list":
        return rng.sample(POOLS[args[0]], rng.randint(2, 4))
    if kind == "ints":
        return [rng.randint(int(args[0]), int(args[1])) for _ in range(rng.randint(3, 6))]
    if kind == "persons":
        return list(dict.fromkeys(_person(rng) for _ in range(rng.randint(2, 4))))
    if kind == "date":
        return f"{rng.choice((2025, 2026))}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if kind == "time":
        return f"{rng.randint(7, 21):02d}:{rng.choice(('00', '15', '30', '45'))}"
    if kind == "code":
        return _code(args[0], rng)
    if kind == "seq":
        return "".join(rng.choice("ACGT") for _ in range(rng.randint(int(args[0]), int(args[1]))))
    if kind == "person":
        return _person(rng)
    if kind == "addr":
        return f"{rng.randint(1, 240)} {rng.choice(POOLS['street'])}"
    raise ValueError(f"toolcalls vocabulary: unknown generator {p.gen!r}")


def value_text(v: Any) -> str:
    """How a question writes a value (numbers as digits, lists as "a, b and c")."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return _join([value_text(x) for x in v])
    return str(v)


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def phrase(p: Param, v: Any, form: str = "pp") -> str:
    """The words that state `v` for parameter `p` in a question."""
    if p.kind == "bool":
        return p.np if v else p.pp
    template = p.np if form == "np" else p.pp or f"with {p.np}"
    return re.sub(r"\ba (?=[aeiouAEIOU])", "an ", template.format(v=value_text(v)))


def draw_args(fn: Function, rng: random.Random, optional: bool) -> dict[str, Any]:
    """Arguments for one call: every required one; with `optional`, one or two optional ones
    (never at their default). String values within a call are distinct."""
    opt = [s for s in fn.slots if not s.required]
    chosen = set(rng.sample(opt, min(len(opt), rng.randint(1, 2)))) if optional and opt else set()
    args: dict[str, Any] = {}
    for s in fn.slots:
        if not (s.required or s in chosen):
            continue
        for _ in range(20):
            v = draw_value(s.param, rng)
            clash = isinstance(v, str) and v in args.values()
            if not clash and value_text(v) != s.param.default:
                break
        args[s.name] = v
    return args


# ---------------------------------------------------------------- questions


def _templates(fn: Function) -> tuple[str, ...]:
    return TEMPLATES["count" if fn.verb == "count" else fn.obj.kind]


def _fill(template: str, fn: Function, args_text: str) -> str:
    text = template.format(
        noun=fn.obj.noun,
        args=args_text,
        verb=fn.verb,
        Verb=fn.verb.capitalize(),
        **{"is": "are" if _plural(fn.obj.noun) else "is"},
    )
    return text[0].upper() + text[1:]


def _args_text(fn: Function, args: dict[str, Any], rng: random.Random, vary: str = "") -> str:
    """The argument phrases of one call (`vary`: this argument holds a list of values, one
    per parallel call, and is stated last)."""
    slots = [s for s in fn.slots if s.name in args]
    if fn.obj.kind == "convert":
        return " ".join(phrase(s.param, args[s.name]) for s in slots)
    rest = [s for s in slots if s.name != vary]
    if rng.random() < 0.3 and not any(s.param.pp.startswith(("and ", "{v}")) for s in rest):
        rng.shuffle(rest)
    text = _merge([phrase(s.param, args[s.name]) for s in rest])
    if vary:
        p = next(s.param for s in slots if s.name == vary)
        last = phrase(p, args[vary], "np" if p.pp == "" else "pp")
        last = f"for {last}" if p.pp == "" else last
        return f"{text}, {last}" if text else last
    return text


def _merge(parts: list[str]) -> str:
    """Phrases in order, the "with ..." ones merged into one ("with A, B and C")."""
    withs = [p.removeprefix("with ") for p in parts if p.startswith("with ")]
    out, merged = "", False
    for p in parts:
        if p.startswith("with "):
            if merged:
                continue
            p, merged = "with " + _join(withs), True
            out += f", {p}" if out else p
        else:
            out += f" {p}" if out else p
    return out


def ask_one(fn: Function, args: dict[str, Any], rng: random.Random) -> str:
    """A question that one call answers."""
    slots = [s for s in fn.slots if s.name in args]
    if fn.obj.kind == "metric" and all(s.param.measure for s in slots) and rng.random() < 0.3:
        text = _join([phrase(s.param, args[s.name], "np") for s in slots])
        return _fill(rng.choice(GIVEN), fn, text)
    return _fill(rng.choice(_templates(fn)), fn, _args_text(fn, args, rng))


def _varying(fn: Function, args: dict[str, Any]) -> list[Slot]:
    """Arguments a parallel question can list several values of."""
    return [
        s
        for s in fn.slots
        if s.required and s.name in args and s.param.kind in ("int", "num", "pick", "person")
    ]


def parallel_calls(
    fn: Function, n: int, rng: random.Random, optional: bool
) -> tuple[list[dict[str, Any]], str]:
    """n calls of `fn` and the question asking for all of them: one argument takes n values
    ("... in A, B and C") or each call is stated in turn ("..., and also ...")."""
    base = draw_args(fn, rng, optional)
    slots = _varying(fn, base)
    if slots and rng.random() < 0.65:
        s = rng.choice(slots)
        values = [base[s.name]]
        for _ in range(50 * n):
            v = draw_value(s.param, rng)
            if len(values) < n and v not in values and v not in base.values():
                values.append(v)
        calls = [{**base, s.name: v} for v in values]
        text = _args_text(fn, {**base, s.name: values}, rng, vary=s.name)
        return calls, _fill(rng.choice(_templates(fn)), fn, text)
    calls, keys = [base], {_required_key(fn, base)}
    for _ in range(50 * n):
        a = draw_args(fn, rng, False)
        a.update({k: v for k, v in base.items() if k not in a})  # same optional arguments
        if len(calls) < n and _required_key(fn, a) not in keys:
            calls.append(a)
            keys.add(_required_key(fn, a))
    texts = [_args_text(fn, a, rng) for a in calls]
    tail = "".join(f"{rng.choice(AGAIN)} {t}" for t in texts[1:])
    return calls, _fill(rng.choice(_templates(fn)), fn, texts[0] + tail)


def _required_key(fn: Function, args: dict[str, Any]) -> str:
    return json.dumps([args[s.name] for s in fn.slots if s.required])


def _chain(parts: list[str], rng: random.Random) -> str:
    out = parts[0]
    for p in parts[1:]:
        low = p if p.startswith(("I ", "I'")) else p[0].lower() + p[1:]
        out += f" {rng.choice(NEXT)} {low}"
    return out


# ---------------------------------------------------------------- the five structures


@dataclass
class Draft:
    """One task before it becomes a Task: offered functions, gold calls, question, reply."""

    category: str
    offered: list[Function]
    calls: list[Call]
    question: str
    reply: str = ""  # irrelevance: the plain-text reply


def _objects(rng: random.Random, k: int) -> list[Obj]:
    """k objects from k different domains."""
    objs = catalog().objects
    chosen = rng.sample(sorted({o.domain for o in objs}), k)
    return [rng.choice([o for o in objs if o.domain == d]) for d in chosen]


def _optional(rng: random.Random) -> bool:
    return rng.random() < P_OPTIONAL


def draft_simple(rng: random.Random) -> Draft:
    fn = make_function(_objects(rng, 1)[0], rng)
    args = draw_args(fn, rng, _optional(rng))
    return Draft("simple", [fn], [(fn, args)], ask_one(fn, args, rng))


def draft_multiple(rng: random.Random) -> Draft:
    fns = [make_function(o, rng) for o in _objects(rng, rng.randint(2, 4))]
    fn = fns[0]
    args = draw_args(fn, rng, _optional(rng))
    rng.shuffle(fns)
    return Draft("multiple", fns, [(fn, args)], ask_one(fn, args, rng))


def draft_parallel(rng: random.Random) -> Draft:
    fn = make_function(_objects(rng, 1)[0], rng)
    calls, question = parallel_calls(fn, rng.randint(2, 4), rng, _optional(rng))
    return Draft("parallel", [fn], [(fn, a) for a in calls], question)


def draft_parallel_multiple(rng: random.Random) -> Draft:
    k = rng.randint(2, 4)
    objs = rng.sample(catalog().objects, k)  # different objects, possibly one domain
    fns = [make_function(o, rng) for o in objs]
    called = fns[: rng.randint(2, k)]
    n_calls = rng.randint(len(called), 4)
    twice = set(rng.sample(range(len(called)), n_calls - len(called)))
    calls: list[Call] = []
    parts = []
    optional = _optional(rng)
    for i, fn in enumerate(called):
        if i in twice:
            many, q = parallel_calls(fn, 2, rng, optional)
            calls += [(fn, a) for a in many]
        else:
            args = draw_args(fn, rng, optional)
            calls.append((fn, args))
            q = ask_one(fn, args, rng)
        parts.append(q)
    rng.shuffle(fns)
    return Draft("parallel_multiple", fns, calls, _chain(parts, rng))


def draft_irrelevance(rng: random.Random) -> Draft:
    cat = catalog()
    offered = _objects(rng, rng.randint(1, 3))
    fns = [make_function(o, rng) for o in offered]
    names = ", ".join(f.name for f in fns)
    reply = rng.choice(REFUSALS).format(names=names)
    if rng.random() < 0.2:
        question = rng.choice(GENERAL).format(topic=rng.choice(POOLS["topic"]))
        return Draft("irrelevance", fns, [], question, reply)
    keys = {o.key for o in offered}
    pool = [
        o
        for o in cat.objects
        if o.domain not in {x.domain for x in offered}
        and not any((o.key, k) in cat.related for k in keys)
    ]
    fn = make_function(rng.choice(pool), rng)
    question = ask_one(fn, draw_args(fn, rng, _optional(rng)), rng)
    return Draft("irrelevance", fns, [], question, reply)


DRAFTERS = {
    "simple": draft_simple,
    "multiple": draft_multiple,
    "parallel": draft_parallel,
    "parallel_multiple": draft_parallel_multiple,
    "irrelevance": draft_irrelevance,
}


# ---------------------------------------------------------------- tasks and SFT records


def call_result(fn: Function, args: dict[str, Any]) -> str:
    """The deterministic result string the deployed function returns for this call."""
    digest = hashlib.sha1(json.dumps([fn.name, args], sort_keys=True).encode()).hexdigest()
    rng = random.Random(digest)
    obj, unit = fn.obj, fn.obj.unit
    if fn.verb == "count":
        return f"{rng.randint(0, 60)} {obj.noun}"
    if obj.kind == "search":
        return f"{rng.randint(1, 40)} {obj.noun} found (best match {_code('@@####', rng)})"
    if obj.kind == "action":
        return f"{obj.noun.removeprefix('a ').removeprefix('an ')} confirmed (ref {_code('@@@###', rng)})"
    if unit.startswith("@"):
        return f"{obj.noun}: {rng.choice(RESULTS[unit[1:]])}"
    if unit.startswith("="):
        unit = str(args.get(next(s.name for s in fn.slots if s.param.key == unit[1:]), ""))
    value = round(rng.uniform(0.5, 999), 2)
    text = f"{value} {unit}".strip()
    return text if obj.kind == "convert" else f"{obj.noun}: {text}"


def to_task(draft: Draft, task_id: str) -> Task:
    """The draft as an ABE task (its tools deployed by arcforge.envs.abe_env)."""
    tools = [f.schema() for f in draft.offered]
    meta = {
        "toolcall_category": draft.category,
        "domains": sorted({f.obj.domain for f in draft.offered}),
    }
    if not draft.calls:  # irrelevance: nothing to call, any reply without a call is right
        abe = {"scenario": draft.category, "tools": tools, "records": [], "required_calls": []}
        return Task(
            task_id,
            "abe",
            draft.question,
            context={"abe": abe},
            tools=[f.name for f in draft.offered],
            validation=Validation(answer=draft.reply),
            source="synth:toolcalls",
            difficulty=0.2,
            metadata={
                "scenario": draft.category,
                "ops": [],
                "sub_questions": [],
                "turns": [],
                **meta,
            },
        )
    records, subs = [], []
    for i, (fn, args) in enumerate(draft.calls):
        result = call_result(fn, args)
        records.append({"tool": fn.name, "arguments": dict(args), "result": result})
        subs.append(SubQuestion(f"q{i + 1}", draft.question, result, None, fn.name, dict(args)))
    answer = ", ".join(r["result"] for r in records)
    spec = ABESpec(draft.category, draft.question, answer, subs, tools, records)
    task = spec.to_task(task_id)
    task.source = "synth:toolcalls"
    task.metadata.update(meta)
    return task


def expert_messages(task: Task) -> list[Message]:
    """The solution as chat messages: user, one assistant turn with every gold call, the
    results, "Answer: ..." (irrelevance: user and the plain-text reply)."""
    abe = task.context["abe"]
    user = Message("user", task.instruction)
    answer = str(task.validation.answer)
    if not abe["required_calls"]:
        return [user, Message("assistant", answer)]
    calls = [
        ToolCall(c["name"], dict(c["arguments"]), id=f"call_{i}")
        for i, c in enumerate(abe["required_calls"])
    ]
    results = [
        Message("tool", r["result"], tool_call_id=c.id, name=c.name)
        for c, r in zip(calls, abe["records"])
    ]
    return [
        user,
        Message("assistant", "", tool_calls=calls),
        *results,
        Message("assistant", f"Answer: {answer}"),
    ]


def sft_record(task: Task) -> dict[str, Any]:
    """An SFT record (arcforge.stages.sft reads `messages` and `tool_schemas`)."""
    return {
        "id": task.id,
        "messages": [m.to_dict() for m in expert_messages(task)],
        "tools": list(task.tools),
        "tool_schemas": task.context["abe"]["tools"],
        "toolcall_category": task.metadata["toolcall_category"],
        "source": "synth:toolcalls",
    }


def allocate(
    n: int, categories: tuple[str, ...], weights: dict[str, float] | None
) -> dict[str, int]:
    """Tasks per category: shares from `weights` (default equal), largest remainder.

    Raises:
        UserError: for an unknown category, a weight outside `categories`, a negative weight
            or weights that sum to zero.
    """
    unknown = sorted(set(categories) - set(CATEGORIES))
    if unknown:
        raise UserError(f"unknown tool-call categories {unknown}; known: {', '.join(CATEGORIES)}")
    w = {c: 1.0 for c in categories} if weights is None else dict(weights)
    outside = sorted(set(w) - set(categories))
    if outside:
        raise UserError(f"tool-call weights for {outside}, not among categories {list(categories)}")
    if any(v < 0 for v in w.values()) or sum(w.values()) <= 0:
        raise UserError(f"tool-call weights must be >= 0 and sum to > 0; got {w}")
    total = sum(w.values())
    exact = {c: n * w.get(c, 0.0) / total for c in categories}
    counts = {c: int(exact[c]) for c in categories}
    rest = sorted(categories, key=lambda c: (counts[c] - exact[c], categories.index(c)))
    for c in rest[: n - sum(counts.values())]:
        counts[c] += 1
    return counts


def synthesize_toolcalls(
    n: int,
    seed: int = 0,
    categories: tuple[str, ...] = CATEGORIES,
    weights: dict[str, float] | None = None,
) -> tuple[list[Task], list[dict[str, Any]], dict[str, Any]]:
    """n function-calling tasks, their SFT records and a summary; deterministic in `seed`,
    with no two tasks sharing both their offered functions and their question.

    Returns:
        (tasks, sft_records, summary): summary counts tasks per category, calls, tasks that
        set optional arguments, and distinct function names (offered and called).
    """
    counts = allocate(n, tuple(categories), weights)
    order = [c for c in categories for _ in range(counts[c])]
    random.Random(f"toolcalls:{seed}:order").shuffle(order)
    seen: set[tuple[tuple[str, ...], str]] = set()
    tasks = []
    for i, cat in enumerate(order):
        for attempt in range(100):
            draft = DRAFTERS[cat](random.Random(f"toolcalls:{seed}:{i}:{attempt}"))
            key = (tuple(sorted(f.name for f in draft.offered)), draft.question)
            if key not in seen and len({f.name for f in draft.offered}) == len(draft.offered):
                seen.add(key)
                break
        else:
            raise RuntimeError(f"toolcalls: no new {cat} task after 100 draws")  # pragma: no cover
        tasks.append(to_task(draft, f"toolcalls-{seed}-{i:05d}"))
    records = [sft_record(t) for t in tasks]
    return tasks, records, summarize(tasks)


def summarize(tasks: list[Task]) -> dict[str, Any]:
    """Tasks per category, calls, distinct function names (offered, called) and domains;
    `optional_arguments`: tasks whose gold calls set optional arguments, out of the
    `optional_possible` tasks whose called functions have any."""
    offered = {n for t in tasks for n in t.tools}
    calls = [c for t in tasks for c in t.context["abe"]["required_calls"]]
    used = possible = 0
    for t in tasks:
        params = {
            s["function"]["name"]: s["function"]["parameters"] for s in t.context["abe"]["tools"]
        }
        optional = {
            c["name"]: set(params[c["name"]]["properties"]) - set(params[c["name"]]["required"])
            for c in t.context["abe"]["required_calls"]
        }
        possible += any(optional.values())
        used += any(
            set(c["arguments"]) & optional[c["name"]] for c in t.context["abe"]["required_calls"]
        )
    return {
        "tasks": len(tasks),
        "categories": dict(Counter(t.metadata["toolcall_category"] for t in tasks)),
        "calls": len(calls),
        "optional_arguments": used,
        "optional_possible": possible,
        "distinct_function_names": len(offered),
        "distinct_called_names": len({c["name"] for c in calls}),
        "domains": len({d for t in tasks for d in t.metadata["domains"]}),
    }

fn main() {
    println!("sqos");
}
